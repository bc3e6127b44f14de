package tokenizer

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentenv/agentenv/core/tokenizer/tokenizertest"
)

// fakeHub answers as the Hugging Face Hub does at
// /{org}/{name}/resolve/{revision}/{file}: X-Repo-Commit and ETag on every
// file; a large (LFS) file is a 302 to a storage server with its SHA-256 in
// X-Linked-Etag; a renamed repo is a relative 307; refusals carry
// X-Error-Code (RepoNotFound, RevisionNotFound, EntryNotFound, GatedRepo).
type fakeHub struct {
	hub, cdn *httptest.Server
	token    string // a gated repo wants "Bearer token"
	corrupt  bool   // the storage server sends other bytes than the hash says
	noCommit bool   // act as a server that is not a Hub
	cdnDown  bool   // the storage server refuses

	mu        sync.Mutex
	hubHits   []string // "path auth" for each request to the Hub
	cdnHits   int
	cdnBearer int // storage requests that carried the token
	repos     map[string]*fakeRepo
}

type fakeRepo struct {
	commit    string
	refs      map[string]string
	files     map[string][]byte
	lfs       map[string]bool
	gated     bool
	renamedTo string
}

func newFakeHub(t *testing.T) *fakeHub {
	f := &fakeHub{repos: map[string]*fakeRepo{}, token: "hf_secret_token"}
	f.hub = httptest.NewServer(http.HandlerFunc(f.serveHub))
	f.cdn = httptest.NewServer(http.HandlerFunc(f.serveCDN))
	t.Cleanup(f.hub.Close)
	t.Cleanup(f.cdn.Close)
	return f
}

func (f *fakeHub) addRepo(name string, files map[string][]byte) *fakeRepo {
	r := &fakeRepo{commit: fmt.Sprintf("%040x", len(f.repos)+0xc0ffee), files: files, lfs: map[string]bool{TokenizerFile: true}}
	r.refs = map[string]string{"main": r.commit}
	f.repos[name] = r
	return r
}

func (f *fakeHub) serveHub(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.hubHits = append(f.hubHits, r.URL.Path+" "+r.Header.Get("Authorization"))
	f.mu.Unlock()
	parts := strings.SplitN(strings.TrimPrefix(r.URL.Path, "/"), "/", 5)
	if len(parts) != 5 || parts[2] != "resolve" {
		http.NotFound(w, r)
		return
	}
	name, rev, file := parts[0]+"/"+parts[1], parts[3], parts[4]
	refuse := func(status int, code string) {
		w.Header().Set("X-Error-Code", code)
		w.WriteHeader(status)
	}
	repo, ok := f.repos[name]
	switch {
	case !ok:
		refuse(http.StatusNotFound, "RepoNotFound")
		return
	case repo.renamedTo != "":
		http.Redirect(w, r, "/"+repo.renamedTo+"/resolve/"+rev+"/"+file, http.StatusTemporaryRedirect)
		return
	case repo.gated && r.Header.Get("Authorization") != "Bearer "+f.token:
		refuse(http.StatusUnauthorized, "GatedRepo")
		return
	}
	commit, ok := repo.refs[rev]
	if !ok && rev == repo.commit {
		commit, ok = rev, true
	}
	if !ok {
		refuse(http.StatusNotFound, "RevisionNotFound")
		return
	}
	if !f.noCommit {
		w.Header().Set("X-Repo-Commit", commit)
	}
	data, ok := repo.files[file]
	if !ok {
		refuse(http.StatusNotFound, "EntryNotFound")
		return
	}
	if repo.lfs[file] {
		sum := sha256.Sum256(data)
		w.Header().Set("X-Linked-Etag", `"`+hex.EncodeToString(sum[:])+`"`)
		w.Header().Set("X-Linked-Size", fmt.Sprint(len(data)))
		w.Header().Set("ETag", `W/"not-the-content-hash"`)
		http.Redirect(w, r, f.cdn.URL+"/blob/"+name+"/"+file, http.StatusFound)
		return
	}
	sum := sha1.Sum(data)
	w.Header().Set("ETag", `"`+hex.EncodeToString(sum[:])+`"`)
	w.Write(data)
}

func (f *fakeHub) serveCDN(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.cdnHits++
	if r.Header.Get("Authorization") != "" {
		f.cdnBearer++
	}
	f.mu.Unlock()
	parts := strings.SplitN(strings.TrimPrefix(r.URL.Path, "/blob/"), "/", 3)
	data := f.repos[parts[0]+"/"+parts[1]].files[parts[2]]
	if f.corrupt {
		data = append([]byte("x"), data[1:]...)
	}
	if f.cdnDown {
		w.WriteHeader(http.StatusForbidden) // as an expired signed URL answers
		return
	}
	w.Write(data)
}

func (f *fakeHub) hubRequests() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.hubHits)
}

func (f *fakeHub) client(t *testing.T, cache string) *Hub {
	return &Hub{Endpoint: f.hub.URL, CacheDir: cache, Token: f.token}
}

func tinyFiles(t *testing.T) map[string][]byte {
	return map[string][]byte{
		TokenizerFile: tinyJSON(t, tinyMerges, nil),
		ConfigFile:    []byte(`{"chat_template": "{{ messages }}", "eos_token": "<|x|>"}`),
	}
}

func TestHubDownloadsIntoTheCache(t *testing.T) {
	f := newFakeHub(t)
	files := tinyFiles(t)
	repo := f.addRepo("acme/tiny", files)
	cache := t.TempDir()
	h := f.client(t, cache)
	dir, err := h.Resolve(context.Background(), "acme/tiny")
	if err != nil {
		t.Fatal(err)
	}
	repoDir := filepath.Join(cache, "models--acme--tiny")
	if want := filepath.Join(repoDir, "snapshots", repo.commit); dir != want {
		t.Fatalf("dir %s, want %s", dir, want)
	}
	// huggingface_hub's layout: refs/main names the commit, snapshot
	// entries are relative links to blobs named by etag.
	if ref, _ := os.ReadFile(filepath.Join(repoDir, "refs", "main")); string(ref) != repo.commit {
		t.Errorf("refs/main = %q", ref)
	}
	sum := sha256.Sum256(files[TokenizerFile])
	link, err := os.Readlink(filepath.Join(dir, TokenizerFile))
	if want := filepath.Join("..", "..", "blobs", hex.EncodeToString(sum[:])); err != nil || link != want {
		t.Errorf("tokenizer.json links to %q (%v), want %q", link, err, want)
	}
	for name, data := range files {
		if got, err := os.ReadFile(filepath.Join(dir, name)); err != nil || string(got) != string(data) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := os.Stat(filepath.Join(repoDir, ".no_exist", repo.commit, ChatTemplateFile)); err != nil {
		t.Errorf("the missing chat_template.jinja is not recorded: %v", err)
	}
	if leftovers, _ := filepath.Glob(filepath.Join(repoDir, "blobs", "*.incomplete")); len(leftovers) > 0 {
		t.Errorf("temporary files left: %v", leftovers)
	}
	if f.cdnHits != 1 || f.cdnBearer != 0 {
		t.Errorf("storage server: %d requests, %d with the token (want 1, 0)", f.cdnHits, f.cdnBearer)
	}
	for _, hit := range f.hubHits {
		if !strings.HasSuffix(hit, " Bearer "+f.token) {
			t.Errorf("Hub request without the token: %s", hit)
		}
	}
	// The next call finds it all in the cache.
	n := f.hubRequests()
	tok, cfg, err := h.Open(context.Background(), "acme/tiny")
	if err != nil {
		t.Fatal(err)
	}
	if f.hubRequests() != n {
		t.Errorf("the second call went to the Hub")
	}
	if countOf(t, tok, "hello") != 1 || cfg.EOSToken != "<|x|>" || cfg.ChatTemplate != "{{ messages }}" {
		t.Errorf("loaded %d tokens, config %+v", countOf(t, tok, "hello"), cfg)
	}
}

func TestHubChatTemplateFileAndPinnedCommit(t *testing.T) {
	f := newFakeHub(t)
	files := tinyFiles(t)
	files[ChatTemplateFile] = []byte("{{ from_jinja }}")
	repo := f.addRepo("acme/tiny", files)
	cache := t.TempDir()
	h := f.client(t, cache)
	h.Revision = repo.commit
	_, cfg, err := h.Open(context.Background(), "acme/tiny")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ChatTemplate != "{{ from_jinja }}" || cfg.TemplateSource != ChatTemplateFile {
		t.Errorf("config %+v", cfg)
	}
	if _, err := os.Stat(filepath.Join(cache, "models--acme--tiny", "refs")); !os.IsNotExist(err) {
		t.Errorf("a commit revision wrote a ref: %v", err)
	}
}

func TestHubRefusals(t *testing.T) {
	f := newFakeHub(t)
	f.addRepo("acme/gated", tinyFiles(t)).gated = true
	f.addRepo("acme/notok", map[string][]byte{"README.md": []byte("no tokenizer")})
	f.addRepo("acme/old", nil).renamedTo = "acme/missing"
	tests := []struct {
		name, ref, token, rev string
		want                  []string
	}{
		{"gated without token", "acme/gated", "", "", []string{"model acme/gated, file tokenizer.json", "401 (GatedRepo)", "accept its terms", "HF_TOKEN"}},
		{"gated with a wrong token", "acme/gated", "hf_wrong", "", []string{"GatedRepo", "HF_TOKEN"}},
		{"no such model", "acme/nothing", "", "", []string{"model acme/nothing", "404 (RepoNotFound)", "check the model name"}},
		{"renamed to a missing model", "acme/old", "", "", []string{"RepoNotFound"}},
		{"no tokenizer.json", "acme/notok", "", "", []string{"EntryNotFound", "no such file"}},
		{"no such revision", "acme/gated", "hf_secret_token", "v9", []string{"RevisionNotFound", `no revision "v9"`}},
		{"not a model name", "just-a-word", "", "", []string{"neither a folder nor a Hugging Face model name"}},
		{"missing folder", "./models/qwen", "", "", []string{"no folder ./models/qwen"}},
		{"too many parts", "a/b/c", "", "", []string{"no folder a/b/c"}},
		{"dots", "acme/..", "", "", []string{"no folder"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := &Hub{Endpoint: f.hub.URL, CacheDir: t.TempDir(), Token: tt.token, Revision: tt.rev}
			_, err := h.Resolve(context.Background(), tt.ref)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if tt.token != "" && strings.Contains(err.Error(), tt.token) {
				t.Errorf("error shows the token: %v", err)
			}
			if entries, _ := os.ReadDir(h.CacheDir); len(entries) > 0 {
				if snaps, _ := filepath.Glob(filepath.Join(h.CacheDir, "*", "snapshots", "*", "*")); len(snaps) > 0 {
					t.Errorf("a failed download left files: %v", snaps)
				}
			}
		})
	}
}

func TestHubRenamedRepoKeepsTheToken(t *testing.T) {
	f := newFakeHub(t)
	repo := f.addRepo("acme/new", tinyFiles(t))
	repo.gated = true
	f.addRepo("acme/old", nil).renamedTo = "acme/new"
	dir, err := f.client(t, t.TempDir()).Resolve(context.Background(), "acme/old")
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(dir) != repo.commit || !strings.Contains(dir, "models--acme--old") {
		t.Errorf("dir %s", dir)
	}
}

func TestHubCorruptDownload(t *testing.T) {
	f := newFakeHub(t)
	f.addRepo("acme/tiny", tinyFiles(t))
	f.corrupt = true
	cache := t.TempDir()
	_, err := f.client(t, cache).Resolve(context.Background(), "acme/tiny")
	if err == nil || !strings.Contains(err.Error(), "corrupt") {
		t.Fatalf("err = %v", err)
	}
	blobs, _ := os.ReadDir(filepath.Join(cache, "models--acme--tiny", "blobs"))
	if len(blobs) != 0 {
		t.Errorf("blobs left: %v", blobs)
	}
	if _, err := os.Stat(filepath.Join(cache, "models--acme--tiny", "refs")); !os.IsNotExist(err) {
		t.Errorf("a ref was written: %v", err)
	}
}

func TestHubStorageServerRefuses(t *testing.T) {
	f := newFakeHub(t)
	f.addRepo("acme/tiny", tinyFiles(t))
	f.cdnDown = true
	_, err := f.client(t, t.TempDir()).Resolve(context.Background(), "acme/tiny")
	if err == nil || !strings.Contains(err.Error(), "storage server") || !strings.Contains(err.Error(), "403") ||
		strings.Contains(err.Error(), "HF_TOKEN") {
		t.Fatalf("err = %v", err)
	}
}

func TestHubNotAHub(t *testing.T) {
	f := newFakeHub(t)
	f.addRepo("acme/tiny", tinyFiles(t))
	f.noCommit = true
	_, err := f.client(t, t.TempDir()).Resolve(context.Background(), "acme/tiny")
	if err == nil || !strings.Contains(err.Error(), "no X-Repo-Commit") || !strings.Contains(err.Error(), "HF_ENDPOINT") {
		t.Fatalf("err = %v", err)
	}
}

func TestHubOfflineAndFolders(t *testing.T) {
	f := newFakeHub(t)
	f.addRepo("acme/tiny", tinyFiles(t))
	cache := t.TempDir()
	h := f.client(t, cache)
	h.Offline = true
	if _, err := h.Resolve(context.Background(), "acme/tiny"); err == nil || !strings.Contains(err.Error(), "HF_HUB_OFFLINE") {
		t.Fatalf("offline, empty cache: %v", err)
	}
	if f.hubRequests() != 0 {
		t.Fatal("offline went to the Hub")
	}
	h.Offline = false
	want, err := h.Resolve(context.Background(), "acme/tiny")
	if err != nil {
		t.Fatal(err)
	}
	h.Offline = true
	if got, err := h.Resolve(context.Background(), "acme/tiny"); err != nil || got != want {
		t.Fatalf("offline, cached: %s, %v", got, err)
	}
	// A folder is used as it is; one without tokenizer.json is refused.
	if got, err := h.Resolve(context.Background(), want); err != nil || got != want {
		t.Errorf("folder: %s, %v", got, err)
	}
	if _, err := h.Resolve(context.Background(), t.TempDir()); err == nil || !strings.Contains(err.Error(), "has no tokenizer.json") {
		t.Errorf("empty folder: %v", err)
	}
}

// TestHubReadsACacheOfPlainFiles: a cache written by other tools (plain
// files, no links; the config recorded as missing) is read without a request.
func TestHubReadsACacheOfPlainFiles(t *testing.T) {
	f := newFakeHub(t)
	cache := t.TempDir()
	commit := strings.Repeat("ab", 20)
	repoDir := filepath.Join(cache, "models--acme--plain")
	snap := filepath.Join(repoDir, "snapshots", commit)
	os.MkdirAll(snap, 0o755)
	writeFile(t, filepath.Join(snap, TokenizerFile), string(tinyJSON(t, tinyMerges, nil)))
	os.MkdirAll(filepath.Join(repoDir, "refs"), 0o755)
	writeFile(t, filepath.Join(repoDir, "refs", "main"), commit+"\n")
	h := f.client(t, cache)
	if _, err := h.Resolve(context.Background(), "acme/plain"); err == nil {
		t.Fatal("a snapshot with no config and no record of its absence counts as complete")
	}
	if err := markMissing(repoDir, commit, ConfigFile); err != nil {
		t.Fatal(err)
	}
	n := f.hubRequests()
	tok, cfg, err := h.Open(context.Background(), "acme/plain")
	if err != nil || tok == nil || cfg != nil {
		t.Fatalf("%v %v %v", tok, cfg, err)
	}
	if f.hubRequests() != n {
		t.Error("went to the Hub")
	}
}

// TestHubConcurrentDownloads: several processes' worth of callers filling
// one cache at once all get a complete snapshot.
func TestHubConcurrentDownloads(t *testing.T) {
	f := newFakeHub(t)
	f.addRepo("acme/tiny", tinyFiles(t))
	cache := t.TempDir()
	var wg sync.WaitGroup
	dirs := make([]string, 4)
	for i := range dirs {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			dir, err := f.client(t, cache).Resolve(context.Background(), "acme/tiny")
			if err != nil {
				t.Error(err)
				return
			}
			if _, err := Load(dir); err != nil {
				t.Error(err)
			}
			dirs[i] = dir
		}(i)
	}
	wg.Wait()
	for _, d := range dirs[1:] {
		if d != dirs[0] {
			t.Errorf("dirs differ: %v", dirs)
		}
	}
}

func TestHubFromEnv(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HF_HOME", home)
	t.Setenv("HF_HUB_CACHE", "")
	t.Setenv("HF_ENDPOINT", "http://mirror.example/")
	t.Setenv("HF_TOKEN", "")
	t.Setenv("HF_TOKEN_PATH", "")
	t.Setenv("HF_HUB_OFFLINE", "1")
	writeFile(t, filepath.Join(home, "token"), "hf_from_file\n")
	h := HubFromEnv()
	if h.CacheDir != filepath.Join(home, "hub") || h.Endpoint != "http://mirror.example" || h.Token != "hf_from_file" || !h.Offline {
		t.Errorf("%+v", h)
	}
	t.Setenv("HF_HUB_CACHE", "/elsewhere")
	t.Setenv("HF_TOKEN", "hf_env")
	t.Setenv("HF_HUB_OFFLINE", "0")
	h = HubFromEnv()
	if h.CacheDir != "/elsewhere" || h.Token != "hf_env" || h.Offline {
		t.Errorf("%+v", h)
	}
	t.Setenv("HF_HOME", "")
	t.Setenv("HF_HUB_CACHE", "")
	t.Setenv("XDG_CACHE_HOME", "")
	userHome, _ := os.UserHomeDir()
	if h = HubFromEnv(); h.CacheDir != filepath.Join(userHome, ".cache", "huggingface", "hub") {
		t.Errorf("default cache %s", h.CacheDir)
	}
}

// TestHubCacheReadByHuggingFace reads the cache a download wrote with
// scanCacheDir from npm @huggingface/hub, Hugging Face's own cache scanner:
// it must find the repo, the commit with its ref, and each file's blob.
func TestHubCacheReadByHuggingFace(t *testing.T) {
	oracle := tokenizertest.Oracle(t)
	f := newFakeHub(t)
	files := tinyFiles(t)
	repo := f.addRepo("acme/tiny", files)
	cache := t.TempDir()
	if _, err := f.client(t, cache).Resolve(context.Background(), "acme/tiny"); err != nil {
		t.Fatal(err)
	}
	var scan struct {
		Warnings []string `json:"warnings"`
		Repos    []struct {
			Name, Type string
			Files      int
			Revisions  []struct {
				Commit string
				Refs   []string
				Files  []struct {
					Path, Blob string
					Size       int
				}
			}
		}
	}
	out := tokenizertest.Node(t, filepath.Join("testdata", "scancache.mjs"), oracle, cache)
	if err := json.Unmarshal(out, &scan); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(scan.Warnings) > 0 || len(scan.Repos) != 1 {
		t.Fatalf("scan: %s", out)
	}
	r := scan.Repos[0]
	if r.Name != "acme/tiny" || r.Type != "model" || r.Files != len(files) || len(r.Revisions) != 1 {
		t.Fatalf("repo: %s", out)
	}
	rev := r.Revisions[0]
	if rev.Commit != repo.commit || len(rev.Refs) != 1 || rev.Refs[0] != "main" || len(rev.Files) != len(files) {
		t.Fatalf("revision: %s", out)
	}
	for _, file := range rev.Files {
		data, ok := files[file.Path]
		if !ok || file.Size != len(data) || !strings.HasPrefix(file.Blob, "blobs"+string(filepath.Separator)) {
			t.Errorf("file %+v", file)
		}
	}
}

// A Hub out of reach (no network) fails at once saying how to go on
// offline: a local folder, and the docs section that says where one
// comes from.
func TestHubUnreachableNamesTheOfflineWay(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	h := &Hub{Endpoint: closed, CacheDir: t.TempDir()}
	_, err = h.Resolve(context.Background(), "acme/tiny")
	if err == nil || !strings.Contains(err.Error(), "offline, pass --tokenizer a local folder holding tokenizer.json") || !strings.Contains(err.Error(), `docs/tokenizers.md, "Without the network"`) {
		t.Fatalf("err = %v", err)
	}
	doc, err := os.ReadFile("../../docs/tokenizers.md")
	if err != nil || !strings.Contains(string(doc), "\n### Without the network\n") {
		t.Fatalf("docs/tokenizers.md has no section the error names: %v", err)
	}
}
