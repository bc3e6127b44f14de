package tokenizer

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Hub finds a model's tokenizer files: in a local folder, in the Hugging
// Face cache, or by downloading them from the Hub into that cache, laid out
// as huggingface_hub lays it out (models--ORG--NAME/{blobs,snapshots,refs}),
// so Python tools and this package share one cache.
type Hub struct {
	// Endpoint is the Hub's URL (HF_ENDPOINT; default https://huggingface.co).
	Endpoint string
	// Token is sent as "Authorization: Bearer" to the Hub (never to the
	// servers it redirects to, never logged). HF_TOKEN, else the token file
	// huggingface-cli login writes.
	Token string
	// CacheDir is the hub cache (HF_HUB_CACHE, else $HF_HOME/hub, else
	// ~/.cache/huggingface/hub).
	CacheDir string
	// Revision is the branch, tag or commit to use (default "main").
	Revision string
	// Offline forbids downloads (HF_HUB_OFFLINE=1).
	Offline bool
	// Client makes the requests (default: a client with a 10-minute timeout).
	Client *http.Client
	// Logger tells of downloads (default: none).
	Logger hclog.Logger
}

// DefaultEndpoint is the Hub's address when HF_ENDPOINT is unset.
const DefaultEndpoint = "https://huggingface.co"

// HubFromEnv reads the Hub settings from the environment, as huggingface_hub
// does: HF_ENDPOINT, HF_TOKEN (else HF_TOKEN_PATH or $HF_HOME/token),
// HF_HUB_CACHE or HF_HOME, HF_HUB_OFFLINE.
func HubFromEnv() *Hub {
	home := os.Getenv("HF_HOME")
	if home == "" {
		base := os.Getenv("XDG_CACHE_HOME")
		if base == "" {
			if h, err := os.UserHomeDir(); err == nil {
				base = filepath.Join(h, ".cache")
			}
		}
		home = filepath.Join(base, "huggingface")
	}
	h := &Hub{Endpoint: strings.TrimRight(os.Getenv("HF_ENDPOINT"), "/"), CacheDir: os.Getenv("HF_HUB_CACHE")}
	if h.CacheDir == "" {
		h.CacheDir = filepath.Join(home, "hub")
	}
	h.Token = os.Getenv("HF_TOKEN")
	if h.Token == "" {
		path := os.Getenv("HF_TOKEN_PATH")
		if path == "" {
			path = filepath.Join(home, "token")
		}
		if b, err := os.ReadFile(path); err == nil {
			h.Token = strings.TrimSpace(string(b))
		}
	}
	switch strings.ToLower(os.Getenv("HF_HUB_OFFLINE")) {
	case "1", "true", "yes", "on":
		h.Offline = true
	}
	return h
}

// Open finds ref's files (see Resolve) and loads its tokenizer and config;
// the config is nil when the model has no tokenizer_config.json.
func (h *Hub) Open(ctx context.Context, ref string) (*Tokenizer, *Config, error) {
	dir, err := h.Resolve(ctx, ref)
	if err != nil {
		return nil, nil, err
	}
	tok, err := Load(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("tokenizer of %s: %w", ref, err)
	}
	cfg, err := LoadConfig(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return tok, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("tokenizer config of %s: %w", ref, err)
	}
	return tok, cfg, nil
}

var (
	repoName  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$`)
	commitSHA = regexp.MustCompile(`^[0-9a-f]{40}$`)
	safeName  = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)
)

// Resolve returns the folder holding ref's tokenizer.json (with
// tokenizer_config.json and chat_template.jinja when the model has them).
// ref is a folder, or a Hub model ORG/NAME: looked up in the cache at
// Revision, and downloaded into it when missing there.
func (h *Hub) Resolve(ctx context.Context, ref string) (string, error) {
	if st, err := os.Stat(ref); err == nil && st.IsDir() {
		if _, err := os.Stat(filepath.Join(ref, TokenizerFile)); err != nil {
			return "", fmt.Errorf("folder %s has no %s: give a model folder that holds one, or a Hub model as ORG/NAME", ref, TokenizerFile)
		}
		return filepath.Abs(ref)
	}
	if !repoName.MatchString(ref) || strings.Contains(ref, "..") || strings.Contains(ref, "--") {
		if strings.ContainsAny(ref, `/\`) || strings.HasPrefix(ref, ".") || strings.HasPrefix(ref, "~") {
			return "", fmt.Errorf("no folder %s (and it is not a Hugging Face model name of the form ORG/NAME)", ref)
		}
		return "", fmt.Errorf("%q is neither a folder nor a Hugging Face model name of the form ORG/NAME", ref)
	}
	rev := h.revision()
	if strings.Contains(rev, "..") || strings.HasPrefix(rev, "/") || rev == "" {
		return "", fmt.Errorf("revision %q is not a branch, tag or commit", rev)
	}
	repoDir := filepath.Join(h.cacheDir(), "models--"+strings.ReplaceAll(ref, "/", "--"))
	if dir, ok := cachedSnapshot(repoDir, rev); ok {
		return dir, nil
	}
	if h.Offline {
		return "", fmt.Errorf("model %s (revision %s) is not in the Hugging Face cache %s and HF_HUB_OFFLINE is set: "+
			"unset it to download the model, or give a folder that holds its %s", ref, rev, h.cacheDir(), TokenizerFile)
	}
	return h.download(ctx, ref, rev, repoDir)
}

func (h *Hub) revision() string {
	if h.Revision == "" {
		return "main"
	}
	return h.Revision
}

func (h *Hub) cacheDir() string {
	if h.CacheDir != "" {
		return h.CacheDir
	}
	return HubFromEnv().CacheDir
}

func (h *Hub) endpoint() string {
	if h.Endpoint != "" {
		return strings.TrimRight(h.Endpoint, "/")
	}
	return DefaultEndpoint
}

func (h *Hub) logger() hclog.Logger {
	if h.Logger != nil {
		return h.Logger
	}
	return hclog.NewNullLogger()
}

func (h *Hub) client() *http.Client {
	if h.Client != nil {
		return h.Client
	}
	return &http.Client{Timeout: 10 * time.Minute}
}

// cachedSnapshot returns the snapshot folder of rev when it holds
// tokenizer.json, and tokenizer_config.json or the record that the model
// has none.
func cachedSnapshot(repoDir, rev string) (string, bool) {
	commit := rev
	if !commitSHA.MatchString(rev) {
		b, err := os.ReadFile(filepath.Join(repoDir, "refs", filepath.FromSlash(rev)))
		if err != nil {
			return "", false
		}
		commit = strings.TrimSpace(string(b))
		if !safeName.MatchString(commit) || strings.Trim(commit, ".") == "" {
			return "", false
		}
	}
	snap := filepath.Join(repoDir, "snapshots", commit)
	if !fileExists(filepath.Join(snap, TokenizerFile)) {
		return "", false
	}
	if !fileExists(filepath.Join(snap, ConfigFile)) && !fileExists(filepath.Join(repoDir, ".no_exist", commit, ConfigFile)) {
		return "", false
	}
	return snap, true
}

// fileExists follows links: a snapshot entry whose blob is gone is missing.
func fileExists(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}
