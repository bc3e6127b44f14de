package k8scluster

import (
	"archive/tar"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
)

// layout is an image archive read into memory, as an OCI image layout:
// the images (index.json's manifests) and the blobs by digest.
type layout struct {
	index []descriptor
	blobs map[string][]byte
}

// readLayout reads an OCI image-layout tarball (WriteOCI's, or `docker
// save`'s since Docker 25), or the older `docker save` format (manifest.json
// naming each image's config and layer tarballs), which it turns into an
// OCI manifest: the layers are the same uncompressed tarballs, the config
// the same JSON, so the image's digests of content (diff IDs) still hold.
func readLayout(archive string) (*layout, error) {
	f, err := os.Open(archive)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	files := map[string][]byte{}
	links := map[string]string{} // docker save links a layer seen twice
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", archive, err)
		}
		name := path.Clean(h.Name)
		switch h.Typeflag {
		case tar.TypeReg:
			if files[name], err = io.ReadAll(tr); err != nil {
				return nil, fmt.Errorf("%s: %s: %w", archive, name, err)
			}
		case tar.TypeSymlink:
			links[name] = path.Join(path.Dir(name), h.Linkname)
		}
	}
	for name, target := range links {
		if b, ok := files[target]; ok {
			files[name] = b
		}
	}
	if index, ok := files["index.json"]; ok {
		return ociLayout(archive, index, files)
	}
	if m, ok := files["manifest.json"]; ok {
		return dockerLayout(archive, m, files)
	}
	return nil, fmt.Errorf("%s is neither an OCI image layout (index.json) nor a `docker save` archive (manifest.json)", archive)
}

func ociLayout(archive string, index []byte, files map[string][]byte) (*layout, error) {
	var idx struct {
		Manifests []descriptor `json:"manifests"`
	}
	if err := json.Unmarshal(index, &idx); err != nil {
		return nil, fmt.Errorf("%s: index.json: %w", archive, err)
	}
	l := &layout{index: idx.Manifests, blobs: map[string][]byte{}}
	for name, b := range files {
		if hex, ok := strings.CutPrefix(name, "blobs/sha256/"); ok {
			l.blobs["sha256:"+hex] = b
		}
	}
	return l, nil
}

// dockerLayout turns the older `docker save` format into a layout of one
// OCI manifest per image.
func dockerLayout(archive string, manifest []byte, files map[string][]byte) (*layout, error) {
	var images []struct {
		Config string
		Layers []string
	}
	if err := json.Unmarshal(manifest, &images); err != nil {
		return nil, fmt.Errorf("%s: manifest.json: %w", archive, err)
	}
	l := &layout{blobs: map[string][]byte{}}
	add := func(mediaType, name string) (descriptor, error) {
		b, ok := files[path.Clean(name)]
		if !ok {
			return descriptor{}, fmt.Errorf("%s: manifest.json names %s, which is not in the archive", archive, name)
		}
		d := blobDesc(mediaType, b)
		l.blobs[d.Digest] = b
		return d, nil
	}
	for _, img := range images {
		config, err := add(mediaConfig, img.Config)
		if err != nil {
			return nil, err
		}
		layers := []descriptor{}
		for _, name := range img.Layers {
			d, err := add(mediaLayer, name)
			if err != nil {
				return nil, err
			}
			layers = append(layers, d)
		}
		m, err := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": mediaManifest, "config": config, "layers": layers})
		if err != nil {
			return nil, err
		}
		d := blobDesc(mediaManifest, m)
		l.blobs[d.Digest] = m
		l.index = append(l.index, d)
	}
	return l, nil
}
