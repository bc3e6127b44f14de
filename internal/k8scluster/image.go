package k8scluster

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Image describes a FROM-scratch image: one layer, from a root file tree
// or a single binary.
type Image struct {
	// Source is a folder (the image's root file tree) or a file (a static
	// binary, placed at /<its base name>, mode 0755).
	Source string
	// Ref names the image, normalized as the CRI does (NormalizeRef).
	Ref string
	// Entrypoint is the image's entrypoint: an absolute path inside it and
	// its arguments. Empty: /<base name of Source> when Source is a file.
	Entrypoint []string
	// Env is the config's environment (PATH=/ when empty).
	Env []string
}

// OCI media types the tarball uses.
const (
	mediaManifest = "application/vnd.oci.image.manifest.v1+json"
	mediaConfig   = "application/vnd.oci.image.config.v1+json"
	mediaLayer    = "application/vnd.oci.image.layer.v1.tar"
)

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Platform    *platform         `json:"platform,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

type platform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
}

// WriteOCI writes img as an OCI image-layout tarball to w: the layout,
// index.json naming the image (as containerd's importer reads it), and the
// layer, config and manifest blobs. The output depends only on the input:
// owners are 0, times the epoch, entries sorted.
func WriteOCI(w io.Writer, img Image) error {
	ref, err := NormalizeRef(img.Ref)
	if err != nil {
		return err
	}
	fi, err := os.Stat(img.Source)
	if err != nil {
		return fmt.Errorf("image %s: source: %w", ref, err)
	}
	ep := img.Entrypoint
	if len(ep) == 0 {
		if fi.IsDir() {
			return fmt.Errorf("image %s: an entrypoint is needed when the source %s is a folder", ref, img.Source)
		}
		ep = []string{"/" + filepath.Base(img.Source)}
	}
	if !path.IsAbs(ep[0]) {
		return fmt.Errorf("image %s: entrypoint %q must be an absolute path inside the image", ref, ep[0])
	}
	var layer bytes.Buffer
	if fi.IsDir() {
		err = layerFromDir(&layer, img.Source)
	} else {
		err = layerFromFile(&layer, img.Source, fi)
	}
	if err != nil {
		return fmt.Errorf("image %s: layer: %w", ref, err)
	}
	env := img.Env
	if len(env) == 0 {
		env = []string{"PATH=/"}
	}
	layerDesc := blobDesc(mediaLayer, layer.Bytes())
	config, err := json.Marshal(map[string]any{
		"architecture": "amd64",
		"os":           "linux",
		"config":       map[string]any{"Entrypoint": ep, "Env": env},
		"rootfs":       map[string]any{"type": "layers", "diff_ids": []string{layerDesc.Digest}},
	})
	if err != nil {
		return err
	}
	configDesc := blobDesc(mediaConfig, config)
	manifest, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     mediaManifest,
		"config":        configDesc,
		"layers":        []descriptor{layerDesc},
	})
	if err != nil {
		return err
	}
	manDesc := blobDesc(mediaManifest, manifest)
	manDesc.Platform = &platform{Architecture: "amd64", OS: "linux"}
	manDesc.Annotations = map[string]string{
		"io.containerd.image.name":          ref,
		"org.opencontainers.image.ref.name": ref,
	}
	index, err := json.Marshal(map[string]any{"schemaVersion": 2, "manifests": []descriptor{manDesc}})
	if err != nil {
		return err
	}
	tw := tar.NewWriter(w)
	files := []struct {
		name string
		data []byte
	}{
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{"index.json", index},
		{blobPath(layerDesc), layer.Bytes()},
		{blobPath(configDesc), config},
		{blobPath(manDesc), manifest},
	}
	for _, d := range []string{"blobs/", "blobs/sha256/"} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: 0o755, ModTime: time.Unix(0, 0)}); err != nil {
			return err
		}
	}
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: f.name, Mode: 0o644, Size: int64(len(f.data)), ModTime: time.Unix(0, 0)}); err != nil {
			return err
		}
		if _, err := tw.Write(f.data); err != nil {
			return err
		}
	}
	return tw.Close()
}

func blobDesc(mediaType string, b []byte) descriptor {
	sum := sha256.Sum256(b)
	return descriptor{MediaType: mediaType, Digest: "sha256:" + hex.EncodeToString(sum[:]), Size: int64(len(b))}
}

func blobPath(d descriptor) string { return "blobs/sha256/" + strings.TrimPrefix(d.Digest, "sha256:") }

// layerFromFile is a layer holding one file at /<base name>, executable.
func layerFromFile(w io.Writer, src string, fi fs.FileInfo) error {
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file or a folder", src)
	}
	tw := tar.NewWriter(w)
	if err := addFile(tw, src, filepath.Base(src), 0o755, fi.Size()); err != nil {
		return err
	}
	return tw.Close()
}

// layerFromDir is a layer holding the tree under root, entries sorted,
// owned by root, timestamps at the epoch.
func layerFromDir(w io.Writer, root string) error {
	var paths []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != root {
			paths = append(paths, p)
		}
		return nil
	})
	if err != nil {
		return err
	}
	sort.Strings(paths)
	tw := tar.NewWriter(w)
	for _, p := range paths {
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		name := filepath.ToSlash(rel)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		mode := int64(fi.Mode().Perm())
		switch {
		case fi.IsDir():
			err = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode, ModTime: time.Unix(0, 0)})
		case fi.Mode()&fs.ModeSymlink != 0:
			target, lerr := os.Readlink(p)
			if lerr != nil {
				return lerr
			}
			err = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: target, Mode: 0o777, ModTime: time.Unix(0, 0)})
		case fi.Mode().IsRegular():
			err = addFile(tw, p, name, mode, fi.Size())
		default:
			return fmt.Errorf("%s: only files, folders and symlinks can go in an image", p)
		}
		if err != nil {
			return err
		}
	}
	return tw.Close()
}

func addFile(tw *tar.Writer, src, name string, mode, size int64) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: size, ModTime: time.Unix(0, 0)}); err != nil {
		return err
	}
	if _, err := io.CopyN(tw, f, size); err != nil {
		return fmt.Errorf("%s: %w", src, err)
	}
	return nil
}

// NormalizeRef spells ref as the CRI looks it up: a name without a registry
// is on docker.io (under library/ when it has no path), and a name without
// a tag or digest is :latest. Pods name images as users write them; the
// image must be stored under the normalized name for the kubelet to find it.
func NormalizeRef(ref string) (string, error) {
	if ref == "" || strings.ContainsAny(ref, " \t\n") {
		return "", fmt.Errorf("image reference %q: must be non-empty, without spaces", ref)
	}
	name, rest := ref, ""
	if i := strings.Index(ref, "@"); i >= 0 {
		name, rest = ref[:i], ref[i:]
	} else if t := tagPart(ref); t != "" {
		name, rest = ref[:len(ref)-len(t)], t
	}
	if name == "" || strings.HasPrefix(name, "/") || strings.HasSuffix(name, "/") || strings.Contains(name, "//") || rest == ":" {
		return "", fmt.Errorf("image reference %q: malformed name", ref)
	}
	if name != strings.ToLower(name) {
		return "", fmt.Errorf("image reference %q: the repository name must be lower-case", ref)
	}
	first, _, hasPath := strings.Cut(name, "/")
	if !hasPath || !(strings.ContainsAny(first, ".:") || first == "localhost") {
		if !hasPath {
			name = "library/" + name
		}
		name = "docker.io/" + name
	}
	if rest == "" {
		rest = ":latest"
	}
	return name + rest, nil
}

// tagPart is ":tag" at the end of ref, or "" (a ':' before the last '/'
// is a registry port).
func tagPart(ref string) string {
	i := strings.LastIndex(ref, ":")
	if i < 0 || strings.Contains(ref[i:], "/") || strings.Contains(ref, "@") {
		return ""
	}
	return ref[i:]
}

// ImportImage writes img as an OCI tarball and imports it into the node's
// containerd (namespace k8s.io, where the kubelet's CRI looks), so a pod
// with imagePullPolicy Never or IfNotPresent runs it offline.
func ImportImage(ctx context.Context, containerdSocket string, img Image) error {
	if _, err := os.Stat(containerdSocket); err != nil {
		return fmt.Errorf("import image %s: the node's containerd socket: %w (is the cluster up?)", img.Ref, err)
	}
	tmp, err := os.CreateTemp("", "agentenv-k8s-image-*.tar")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := WriteOCI(tmp, img); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ctr", "-a", containerdSocket, "-n", "k8s.io", "images", "import", tmp.Name()).CombinedOutput()
	if err != nil {
		var ee *exec.Error
		if errors.As(err, &ee) {
			return fmt.Errorf("import image %s: %w (ctr comes with Debian's containerd package)", img.Ref, err)
		}
		return fmt.Errorf("import image %s: ctr images import: %w: %s", img.Ref, err, bytes.TrimSpace(out))
	}
	return nil
}
