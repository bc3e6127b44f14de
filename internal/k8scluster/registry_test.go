package k8scluster

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/pelletier/go-toml/v2"

	"github.com/agentenv/agentenv/sdk/sdktest"
	"github.com/agentenv/agentenv/sdk/sdktest/wait"
)

func TestRegistryRef(t *testing.T) {
	const addr = "10.255.0.2:5000"
	for _, tc := range []struct {
		ref, repo, tag, err string
	}{
		{ref: RegistryHost + "/gridsim:v1", repo: "gridsim", tag: "v1"},
		{ref: RegistryHost + "/agentenv/gridsim-env", repo: "agentenv/gridsim-env", tag: "latest"},
		{ref: addr + "/gridsim:v2", repo: "gridsim", tag: "v2"},
		{ref: "gridsim:v1", err: "not on the cluster's registry: name it " + RegistryHost + "/NAME:TAG"},
		{ref: "agentenv.local/gridsim:v1", err: "not on the cluster's registry"},
		{ref: "10.255.0.6:5000/gridsim:v1", err: "not on the cluster's registry"},
		{ref: RegistryHost + "/gridsim@sha256:" + strings.Repeat("a", 64), err: "pushing needs a tag"},
		{ref: RegistryHost + "/GridSim:v1", err: "lower-case"},
		{ref: "", err: "non-empty"},
	} {
		repo, tag, err := RegistryRef(tc.ref, addr)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("RegistryRef(%q) = %q, %q, %v; want an error saying %q", tc.ref, repo, tag, err, tc.err)
		case tc.err == "" && (err != nil || repo != tc.repo || tag != tc.tag):
			t.Errorf("RegistryRef(%q) = %q, %q, %v; want %q, %q", tc.ref, repo, tag, err, tc.repo, tc.tag)
		}
	}
}

// Each node's containerd reads hosts.toml files from config_path; both the
// registry's name and its address map to it over plain HTTP.
func TestRegistryHostsConfig(t *testing.T) {
	c := Config{StateDir: t.TempDir(), Link: netip.MustParsePrefix("10.255.0.20/30")}.Defaults()
	if got, want := c.RegistryAddr(), "10.255.0.22:5000"; got != want {
		t.Fatalf("RegistryAddr = %s, want %s", got, want)
	}
	for _, n := range c.nodes() {
		if !strings.Contains(n.containerdConfig(), fmt.Sprintf("config_path = %q", n.registryHostsDir())) {
			t.Errorf("%s's containerd config does not set config_path to %s", n.Name(), n.registryHostsDir())
		}
		if err := n.writeRegistryHosts(); err != nil {
			t.Fatal(err)
		}
		for _, host := range []string{RegistryHost, c.RegistryAddr()} {
			b, err := os.ReadFile(filepath.Join(n.registryHostsDir(), host, "hosts.toml"))
			if err != nil {
				t.Fatal(err)
			}
			var h struct {
				Server string `toml:"server"`
				Host   map[string]struct {
					Capabilities []string `toml:"capabilities"`
				} `toml:"host"`
			}
			if err := toml.Unmarshal(b, &h); err != nil {
				t.Fatalf("%s: %v\n%s", host, err, b)
			}
			u := "http://10.255.0.22:5000"
			if h.Server != u || strings.Join(h.Host[u].Capabilities, ",") != "pull,resolve" {
				t.Errorf("%s hosts.toml = %+v, want server and host %s pulling and resolving", host, h, u)
			}
		}
	}
}

// startRegistry runs the cached registry binary on a free local port with
// storage in a temporary folder, stopped when the test ends.
func startRegistry(t *testing.T) string {
	t.Helper()
	if err := CheckRegistry(RegistryBinary()); err != nil {
		sdktest.Missing(t, "distribution's registry", err.Error(), "`k8scluster build` (docs/k8s-test-cluster.md)")
		return ""
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	dir := t.TempDir()
	conf := filepath.Join(dir, "config.yml")
	body := fmt.Sprintf("version: 0.1\nlog: {level: warn}\nstorage: {filesystem: {rootdirectory: %q}}\nhttp: {addr: %q}\n", filepath.Join(dir, "data"), addr)
	if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(RegistryBinary(), "serve", conf)
	cmd.Env = append(os.Environ(), "OTEL_TRACES_EXPORTER=none")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})
	wait.For(t, "the registry to answer", func() error {
		resp, err := http.Get("http://" + addr + "/v2/")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/v2/: %s", resp.Status)
		}
		return nil
	})
	return addr
}

// get fetches a registry path, failing the test unless it answers 200.
func get(t *testing.T, url, accept string) []byte {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Accept", accept)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s: %s", url, resp.Status, b)
	}
	return b
}

// layoutFiles reads an OCI layout tarball into its files.
func layoutFiles(t *testing.T, b []byte) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			files[h.Name], _ = io.ReadAll(tr)
		}
	}
}

// writeLayout writes files as a tarball in dir, and each of links as a
// symbolic link to its target.
func writeLayout(t *testing.T, dir, name string, files map[string][]byte, links ...[2]string) string {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for n, b := range files {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: n, Mode: 0o644, Size: int64(len(b))}); err != nil {
			t.Fatal(err)
		}
		tw.Write(b)
	}
	for _, l := range links {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: l[0], Linkname: l[1], Mode: 0o777}); err != nil {
			t.Fatal(err)
		}
	}
	tw.Close()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// The pusher against the real registry binary: WriteOCI's layout, and the
// same image wrapped in an index (as `docker save` with the containerd
// image store writes it), come back by tag with every blob; layouts it
// cannot push fail saying why.
func TestPushToRegistry(t *testing.T) {
	addr := startRegistry(t)
	c := &Cluster{Info: Info{Registry: addr}}
	dir := t.TempDir()
	bin := filepath.Join(dir, "hello")
	if err := os.WriteFile(bin, []byte("#!/hello\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	var img bytes.Buffer
	if err := WriteOCI(&img, Image{Source: bin, Ref: RegistryHost + "/hello:v1"}); err != nil {
		t.Fatal(err)
	}
	files := layoutFiles(t, img.Bytes())
	var idx struct{ Manifests []descriptor }
	if err := json.Unmarshal(files["index.json"], &idx); err != nil {
		t.Fatal(err)
	}
	man := idx.Manifests[0]
	var m struct {
		Config descriptor
		Layers []descriptor
	}
	json.Unmarshal(files[blobPath(man)], &m)

	ctx := context.Background()
	if err := c.PushImage(ctx, bin, RegistryHost+"/hello:v1"); err != nil {
		t.Fatal(err)
	}
	base := "http://" + addr + "/v2/hello"
	if got := get(t, base+"/manifests/v1", mediaManifest); !bytes.Equal(got, files[blobPath(man)]) {
		t.Errorf("manifest by tag = %s, want the pushed %s", got, files[blobPath(man)])
	}
	for _, d := range append(m.Layers, m.Config) {
		if got := get(t, base+"/blobs/"+d.Digest, "*/*"); !bytes.Equal(got, files[blobPath(d)]) {
			t.Errorf("blob %s differs from the pushed one", d.Digest)
		}
	}

	// An index over the same manifest, pushed under another tag.
	const mediaIndex = "application/vnd.oci.image.index.v1+json"
	index, _ := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": mediaIndex, "manifests": []descriptor{man}})
	indexDesc := blobDesc(mediaIndex, index)
	nested := map[string][]byte{"oci-layout": files["oci-layout"], blobPath(indexDesc): index}
	for n, b := range files {
		if strings.HasPrefix(n, "blobs/sha256/") {
			nested["./"+n] = b // docker save writes no ./, some tools do
		}
	}
	nested["index.json"], _ = json.Marshal(map[string]any{"schemaVersion": 2, "manifests": []descriptor{indexDesc}})
	if err := c.PushArchive(ctx, writeLayout(t, dir, "nested.tar", nested), RegistryHost+"/hello:index"); err != nil {
		t.Fatal(err)
	}
	if got := get(t, base+"/manifests/index", mediaIndex); !bytes.Equal(got, index) {
		t.Errorf("index by tag = %s, want %s", got, index)
	}
	get(t, base+"/manifests/"+man.Digest, mediaManifest)

	// The older `docker save` format (Docker before 25): manifest.json,
	// the config, a folder per layer, a layer seen twice as a link.
	layer := files[blobPath(m.Layers[0])]
	legacy := map[string][]byte{
		"manifest.json": []byte(`[{"Config":"cfg.json","RepoTags":["hello:v1"],"Layers":["l1/layer.tar","l2/layer.tar"]}]`),
		"cfg.json":      files[blobPath(m.Config)],
		"l1/layer.tar":  layer,
	}
	if err := c.PushArchive(ctx, writeLayout(t, dir, "legacy.tar", legacy, [2]string{"l2/layer.tar", "../l1/layer.tar"}), RegistryHost+"/hello:legacy"); err != nil {
		t.Fatal(err)
	}
	var lm struct {
		Config descriptor
		Layers []descriptor
	}
	if err := json.Unmarshal(get(t, base+"/manifests/legacy", mediaManifest), &lm); err != nil {
		t.Fatal(err)
	}
	if lm.Config.Digest != m.Config.Digest || len(lm.Layers) != 2 || lm.Layers[1].Digest != m.Layers[0].Digest {
		t.Errorf("docker save's image pushed as %+v, want config %s and its layer twice", lm, m.Config.Digest)
	}

	two := map[string][]byte{}
	for n, b := range files {
		two[n] = b
	}
	two["index.json"], _ = json.Marshal(map[string]any{"schemaVersion": 2, "manifests": []descriptor{man, man}})
	noLayer := map[string][]byte{"index.json": files["index.json"], blobPath(man): files[blobPath(man)]}
	for _, tc := range []struct {
		name, path, ref, want string
	}{
		{"two images", writeLayout(t, dir, "two.tar", two), RegistryHost + "/hello:two", "holds 2 images, not one"},
		{"no image", writeLayout(t, dir, "empty.tar", map[string][]byte{"manifest.json": []byte("[]")}), RegistryHost + "/hello:empty", "holds 0 images, not one"},
		{"not an archive of images", writeLayout(t, dir, "other.tar", map[string][]byte{"README": []byte("hi")}), RegistryHost + "/hello:other", "neither an OCI image layout (index.json) nor a `docker save` archive"},
		{"docker layer missing", writeLayout(t, dir, "nolayer.tar", map[string][]byte{"manifest.json": legacy["manifest.json"], "cfg.json": legacy["cfg.json"]}), RegistryHost + "/hello:nolayer", "names l1/layer.tar, which is not in the archive"},
		{"blob missing", writeLayout(t, dir, "partial.tar", noLayer), RegistryHost + "/hello:partial", "is not in the layout"},
		{"missing file", filepath.Join(dir, "nope.tar"), RegistryHost + "/hello:nope", "no such file"},
		{"other registry", bin, "docker.io/library/hello:v1", "not on the cluster's registry"},
	} {
		err := c.PushArchive(ctx, tc.path, tc.ref)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.ref) {
			t.Errorf("%s: PushArchive = %v, want an error naming %s and saying %q", tc.name, err, tc.ref, tc.want)
		}
	}
	if err := (&Cluster{}).PushImage(ctx, bin, RegistryHost+"/hello:v1"); err == nil || !strings.Contains(err.Error(), "no image registry") {
		t.Errorf("push to a cluster without a registry: %v, want an error saying it has none", err)
	}
}
