package k8scluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"time"
)

// A small client of the registry's HTTP API (the OCI distribution spec):
// enough to push an OCI image layout, which WriteOCI writes, or what
// `docker save` writes (see readLayout). It needs no Docker daemon, and
// none configured to trust a plain-HTTP registry.

// RegistryRef splits ref, an image on the cluster's registry, into its
// repository and tag. ref must name RegistryHost (or the registry's own
// address, addr) and a tag: registry.agentenv.test/NAME:TAG.
func RegistryRef(ref, addr string) (repo, tag string, err error) {
	norm, err := NormalizeRef(ref)
	if err != nil {
		return "", "", err
	}
	if strings.Contains(norm, "@") {
		return "", "", fmt.Errorf("image %s: pushing needs a tag, not a digest (%s/NAME:TAG)", ref, RegistryHost)
	}
	host, path, _ := strings.Cut(norm, "/")
	if host != RegistryHost && (addr == "" || host != addr) {
		return "", "", fmt.Errorf("image %s is not on the cluster's registry: name it %s/NAME:TAG", ref, RegistryHost)
	}
	t := tagPart(path)
	return strings.TrimSuffix(path, t), t[1:], nil
}

// PushImage writes a FROM-scratch image of src (as ImportImage does) and
// pushes it to the cluster's registry as ref (RegistryHost/NAME:TAG). No
// node has it until a pod names it and the node pulls it.
func (c *Cluster) PushImage(ctx context.Context, src, ref string, entrypoint ...string) error {
	if _, _, err := c.registryRef(ref); err != nil {
		return err
	}
	tmp, err := os.CreateTemp("", "agentenv-k8s-push-*.tar")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := WriteOCI(tmp, Image{Source: src, Ref: ref, Entrypoint: entrypoint}); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return c.PushArchive(ctx, tmp.Name(), ref)
}

// PushDocker pushes the local Docker image image (through `docker save`)
// to the cluster's registry as ref.
func (c *Cluster) PushDocker(ctx context.Context, image, ref string) error {
	if _, _, err := c.registryRef(ref); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "agentenv-k8s-push-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	archive := dir + "/image.tar"
	if out, err := exec.CommandContext(ctx, "docker", "save", "-o", archive, image).CombinedOutput(); err != nil {
		return fmt.Errorf("push %s: docker save %s: %w: %s", ref, image, err, bytes.TrimSpace(out))
	}
	return c.PushArchive(ctx, archive, ref)
}

// PushArchive pushes the one image of archive, an OCI image-layout
// tarball or a `docker save` archive, to the cluster's registry as ref.
func (c *Cluster) PushArchive(ctx context.Context, archive, ref string) error {
	repo, tag, err := c.registryRef(ref)
	if err != nil {
		return err
	}
	l, err := readLayout(archive)
	if err != nil {
		return fmt.Errorf("push %s: %w", ref, err)
	}
	top, err := l.only()
	if err != nil {
		return fmt.Errorf("push %s: %s: %w", ref, archive, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	p := &pusher{hc: &http.Client{}, base: "http://" + c.Info.Registry + "/v2/" + repo, l: l}
	defer p.hc.CloseIdleConnections()
	if err := p.manifest(ctx, top, tag); err != nil {
		return fmt.Errorf("push %s to %s: %w", ref, c.Info.Registry, err)
	}
	return nil
}

func (c *Cluster) registryRef(ref string) (repo, tag string, err error) {
	if c.Info.Registry == "" {
		return "", "", fmt.Errorf("push %s: this cluster has no image registry (cluster.json records none): bring it up with this checkout's `k8scluster up`", ref)
	}
	return RegistryRef(ref, c.Info.Registry)
}

// only is the layout's one image.
func (l *layout) only() (descriptor, error) {
	if len(l.index) != 1 {
		return descriptor{}, fmt.Errorf("the layout holds %d images, not one", len(l.index))
	}
	return l.index[0], nil
}

type pusher struct {
	hc   *http.Client
	base string // http://ADDR/v2/REPO
	l    *layout
}

// manifest pushes what d (a manifest or an index) refers to, then d itself
// under reference (a tag, or its digest for an index's children).
func (p *pusher) manifest(ctx context.Context, d descriptor, reference string) error {
	body, ok := p.l.blobs[d.Digest]
	if !ok {
		return fmt.Errorf("manifest %s is not in the layout", d.Digest)
	}
	var m struct {
		MediaType string       `json:"mediaType"`
		Config    *descriptor  `json:"config"`
		Layers    []descriptor `json:"layers"`
		Manifests []descriptor `json:"manifests"`
	}
	if err := json.Unmarshal(body, &m); err != nil {
		return fmt.Errorf("manifest %s: %w", d.Digest, err)
	}
	for _, child := range m.Manifests {
		if _, ok := p.l.blobs[child.Digest]; !ok {
			continue // another platform's, left out of the layout
		}
		if err := p.manifest(ctx, child, child.Digest); err != nil {
			return err
		}
	}
	blobs := m.Layers
	if m.Config != nil {
		blobs = append(blobs, *m.Config)
	}
	for _, b := range blobs {
		if err := p.blob(ctx, b); err != nil {
			return err
		}
	}
	mt := d.MediaType
	if mt == "" {
		mt = m.MediaType
	}
	resp, err := p.do(ctx, http.MethodPut, p.base+"/manifests/"+reference, mt, body)
	if err != nil {
		return err
	}
	return expect(resp, http.StatusCreated, "put manifest "+reference)
}

// blob uploads d unless the registry has it (one monolithic PUT).
func (p *pusher) blob(ctx context.Context, d descriptor) error {
	body, ok := p.l.blobs[d.Digest]
	if !ok {
		return fmt.Errorf("blob %s is not in the layout", d.Digest)
	}
	resp, err := p.do(ctx, http.MethodHead, p.base+"/blobs/"+d.Digest, "", nil)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		return nil
	}
	resp, err = p.do(ctx, http.MethodPost, p.base+"/blobs/uploads/", "", nil)
	if err != nil {
		return err
	}
	if err := expect(resp, http.StatusAccepted, "start upload of "+d.Digest); err != nil {
		return err
	}
	loc, err := url.Parse(p.base)
	if err == nil {
		loc, err = loc.Parse(resp.Header.Get("Location"))
	}
	if err != nil {
		return fmt.Errorf("upload of %s: location %q: %w", d.Digest, resp.Header.Get("Location"), err)
	}
	q := loc.Query()
	q.Set("digest", d.Digest)
	loc.RawQuery = q.Encode()
	resp, err = p.do(ctx, http.MethodPut, loc.String(), "application/octet-stream", body)
	if err != nil {
		return err
	}
	return expect(resp, http.StatusCreated, "upload "+d.Digest)
}

func (p *pusher) do(ctx context.Context, method, u, contentType string, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	return p.hc.Do(req)
}

// expect closes resp, failing with the registry's error body unless its
// status is want.
func expect(resp *http.Response, want int, what string) error {
	defer resp.Body.Close()
	if resp.StatusCode == want {
		return nil
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return fmt.Errorf("%s: %s: %s", what, resp.Status, bytes.TrimSpace(b))
}
