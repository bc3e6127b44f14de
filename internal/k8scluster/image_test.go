package k8scluster

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestNormalizeRef(t *testing.T) {
	tests := []struct{ in, want, err string }{
		{in: "gridsim", want: "docker.io/library/gridsim:latest"},
		{in: "gridsim:v1", want: "docker.io/library/gridsim:v1"},
		{in: "agentenv/gridsim:v1", want: "docker.io/agentenv/gridsim:v1"},
		{in: "agentenv.local/gridsim:v1", want: "agentenv.local/gridsim:v1"},
		{in: "localhost/x", want: "localhost/x:latest"},
		{in: "registry:5000/team/x", want: "registry:5000/team/x:latest"},
		{in: "registry:5000/team/x:V2", want: "registry:5000/team/x:V2"},
		{in: "x@sha256:" + strings.Repeat("a", 64), want: "docker.io/library/x@sha256:" + strings.Repeat("a", 64)},
		{in: "", err: "non-empty"},
		{in: "Gridsim:v1", err: "lower-case"},
		{in: "a b", err: "spaces"},
		{in: "/x", err: "malformed"},
		{in: "x:", err: "malformed"},
	}
	for _, tc := range tests {
		got, err := NormalizeRef(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("NormalizeRef(%q) = %q, %v; want an error about %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("NormalizeRef(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

// readTar returns a tarball's regular files and the order of its entries.
func readTar(t *testing.T, b []byte) (map[string][]byte, []string, map[string]*tar.Header) {
	t.Helper()
	files := map[string][]byte{}
	hdrs := map[string]*tar.Header{}
	var order []string
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		order = append(order, h.Name)
		hdrs[h.Name] = h
		if h.Typeflag == tar.TypeReg {
			data, _ := io.ReadAll(tr)
			files[h.Name] = data
		}
	}
	return files, order, hdrs
}

func blob(t *testing.T, files map[string][]byte, digest string) []byte {
	t.Helper()
	b, ok := files["blobs/sha256/"+strings.TrimPrefix(digest, "sha256:")]
	if !ok {
		t.Fatalf("blob %s missing", digest)
	}
	sum := sha256.Sum256(b)
	if "sha256:"+hex.EncodeToString(sum[:]) != digest {
		t.Fatalf("blob %s holds content of another digest", digest)
	}
	return b
}

// The tarball is an OCI layout containerd's importer reads: index.json
// names the image, every descriptor's digest and size match its blob, the
// config's diff_id is the (uncompressed) layer's digest, and the layer
// holds the files with their modes, owned by root, at the epoch.
func TestWriteOCI(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "gridsim-env")
	if err := os.WriteFile(bin, []byte("\x7fELF fake binary"), 0o600); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(dir, "rootfs")
	for _, d := range []string{"bin", "etc"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "bin", "httpd"), []byte("binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "etc", "motd"), []byte("hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("bin/httpd", filepath.Join(root, "httpd")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		img       Image
		wantRef   string
		wantEP    []string
		wantLayer map[string]int64 // name -> mode
		wantErr   string
	}{
		{name: "binary", img: Image{Source: bin, Ref: "gridsim:v1"}, wantRef: "docker.io/library/gridsim:v1",
			wantEP: []string{"/gridsim-env"}, wantLayer: map[string]int64{"gridsim-env": 0o755}},
		{name: "folder", img: Image{Source: root, Ref: "agentenv.local/httpd:v1", Entrypoint: []string{"/bin/httpd", "-v"}},
			wantRef: "agentenv.local/httpd:v1", wantEP: []string{"/bin/httpd", "-v"},
			wantLayer: map[string]int64{"bin/": 0o755, "bin/httpd": 0o755, "etc/": 0o755, "etc/motd": 0o644, "httpd": 0o777}},
		{name: "folder without entrypoint", img: Image{Source: root, Ref: "x"}, wantErr: "entrypoint is needed"},
		{name: "relative entrypoint", img: Image{Source: bin, Ref: "x", Entrypoint: []string{"gridsim-env"}}, wantErr: "absolute"},
		{name: "missing source", img: Image{Source: filepath.Join(dir, "nope"), Ref: "x"}, wantErr: "no such file"},
		{name: "bad ref", img: Image{Source: bin, Ref: "Bad"}, wantErr: "lower-case"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			err := WriteOCI(&buf, tc.img)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one about %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			files, _, _ := readTar(t, buf.Bytes())
			if string(files["oci-layout"]) != `{"imageLayoutVersion":"1.0.0"}` {
				t.Errorf("oci-layout = %q", files["oci-layout"])
			}
			var index struct {
				SchemaVersion int          `json:"schemaVersion"`
				Manifests     []descriptor `json:"manifests"`
			}
			if err := json.Unmarshal(files["index.json"], &index); err != nil || len(index.Manifests) != 1 {
				t.Fatalf("index.json: %v %s", err, files["index.json"])
			}
			md := index.Manifests[0]
			if md.Annotations["io.containerd.image.name"] != tc.wantRef || md.Annotations["org.opencontainers.image.ref.name"] != tc.wantRef {
				t.Errorf("index names %v, want %q", md.Annotations, tc.wantRef)
			}
			var man struct {
				Config descriptor   `json:"config"`
				Layers []descriptor `json:"layers"`
			}
			mb := blob(t, files, md.Digest)
			if int64(len(mb)) != md.Size || md.MediaType != mediaManifest {
				t.Errorf("manifest descriptor %+v, blob %d bytes", md, len(mb))
			}
			if err := json.Unmarshal(mb, &man); err != nil || len(man.Layers) != 1 {
				t.Fatalf("manifest: %v %s", err, mb)
			}
			var cfg struct {
				Config struct {
					Entrypoint []string
					Env        []string
				} `json:"config"`
				RootFS struct {
					DiffIDs []string `json:"diff_ids"`
				} `json:"rootfs"`
				OS string `json:"os"`
			}
			cb := blob(t, files, man.Config.Digest)
			if err := json.Unmarshal(cb, &cfg); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(cfg.Config.Entrypoint, tc.wantEP) || cfg.OS != "linux" || !slices.Equal(cfg.Config.Env, []string{"PATH=/"}) {
				t.Errorf("config %s", cb)
			}
			if len(cfg.RootFS.DiffIDs) != 1 || cfg.RootFS.DiffIDs[0] != man.Layers[0].Digest {
				t.Errorf("diff_ids %v, layer %s", cfg.RootFS.DiffIDs, man.Layers[0].Digest)
			}
			lb := blob(t, files, man.Layers[0].Digest)
			if int64(len(lb)) != man.Layers[0].Size {
				t.Errorf("layer size %d, descriptor %d", len(lb), man.Layers[0].Size)
			}
			_, order, hdrs := readTar(t, lb)
			got := map[string]int64{}
			for _, n := range order {
				h := hdrs[n]
				got[n] = h.Mode
				if h.Uid != 0 || h.Gid != 0 || h.ModTime.Unix() != 0 {
					t.Errorf("%s: uid %d gid %d mtime %v, want root at the epoch", n, h.Uid, h.Gid, h.ModTime)
				}
			}
			if len(got) != len(tc.wantLayer) {
				t.Errorf("layer entries %v, want %v", got, tc.wantLayer)
			}
			for n, m := range tc.wantLayer {
				if got[n] != m {
					t.Errorf("layer %s mode %o, want %o (entries %v)", n, got[n], m, got)
				}
			}
			if !slices.IsSorted(order) {
				t.Errorf("layer entries not sorted: %v", order)
			}
			// Same input, same bytes: an import of an unchanged image is a
			// no-op for containerd.
			var again bytes.Buffer
			if err := WriteOCI(&again, tc.img); err != nil || !bytes.Equal(again.Bytes(), buf.Bytes()) {
				t.Errorf("a second write differs (err %v)", err)
			}
		})
	}
}
