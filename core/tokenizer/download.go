package tokenizer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentenv/agentenv/sdk/atomicfile"
)

// hubFile is a file of a model on the Hub; optional ones may be missing.
type hubFile struct {
	name     string
	optional bool
}

var hubFiles = []hubFile{{TokenizerFile, false}, {ConfigFile, true}, {ChatTemplateFile, true}}

// fetched is one downloaded file, in a temporary file until placed.
type fetched struct {
	file    string
	missing bool   // the Hub has no such file
	tmp     string // the content, in blobs/
	etag    string
}

// download fetches the model's files at rev into the cache and returns the
// snapshot folder. Every file is first written to a temporary file in
// blobs/, then renamed into place; the snapshot links come next and the ref
// last, so a reader never finds a ref to an incomplete snapshot.
func (h *Hub) download(ctx context.Context, repo, rev, repoDir string) (dir string, err error) {
	blobs := filepath.Join(repoDir, "blobs")
	if err := os.MkdirAll(blobs, 0o755); err != nil {
		return "", fmt.Errorf("model %s: creating the cache folder: %w", repo, err)
	}
	var got []fetched
	defer func() {
		for _, f := range got {
			if f.tmp != "" {
				os.Remove(f.tmp)
			}
		}
	}()
	commit := ""
	for _, f := range hubFiles {
		// Once the first file names the commit, the rest are read at that
		// commit, so all come from one snapshot even if the branch moves.
		at := rev
		if commit != "" {
			at = commit
		}
		h.logger().Info("downloading from the Hugging Face Hub", "model", repo, "file", f.name, "revision", at, "endpoint", h.endpoint())
		r, c, err := h.fetch(ctx, repo, at, f, blobs)
		if err != nil {
			return "", err
		}
		if commit == "" {
			commit = c
		}
		got = append(got, r)
	}

	snap := filepath.Join(repoDir, "snapshots", commit)
	if err := os.MkdirAll(snap, 0o755); err != nil {
		return "", fmt.Errorf("model %s: %w", repo, err)
	}
	for i := range got {
		f := &got[i]
		if f.missing {
			if err := markMissing(repoDir, commit, f.file); err != nil {
				return "", fmt.Errorf("model %s: %w", repo, err)
			}
			continue
		}
		blob := filepath.Join(blobs, f.etag)
		if err := os.Rename(f.tmp, blob); err != nil {
			return "", fmt.Errorf("model %s: storing %s: %w", repo, f.file, err)
		}
		f.tmp = ""
		if err := linkSnapshot(blob, filepath.Join(snap, f.file)); err != nil {
			return "", fmt.Errorf("model %s: storing %s: %w", repo, f.file, err)
		}
	}
	if rev != commit {
		if err := writeCacheFile(filepath.Join(repoDir, "refs", filepath.FromSlash(rev)), []byte(commit)); err != nil {
			return "", fmt.Errorf("model %s: writing the ref %s: %w", repo, rev, err)
		}
	}
	return snap, nil
}

// fetch downloads one file into a temporary file in blobs and returns it
// with the commit the Hub resolved rev to.
func (h *Hub) fetch(ctx context.Context, repo, rev string, f hubFile, blobs string) (fetched, string, error) {
	res := fetched{file: f.name}
	where := fmt.Sprintf("model %s, file %s", repo, f.name)
	u := h.endpoint() + "/" + repo + "/resolve/" + url.PathEscape(rev) + "/" + f.name
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return res, "", fmt.Errorf("%s: %w", where, err)
	}
	req.Header.Set("User-Agent", "agentenv")
	if h.Token != "" {
		req.Header.Set("Authorization", "Bearer "+h.Token)
	}
	// The Hub answers a large file with a redirect to a storage server; the
	// commit and the file's hash are on the Hub's answer, and the token must
	// not follow the redirect to another host.
	var hubHeader http.Header
	client := *h.client()
	client.CheckRedirect = func(next *http.Request, via []*http.Request) error {
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		if hubHeader == nil && next.Response.Header.Get("X-Repo-Commit") != "" {
			hubHeader = next.Response.Header
		}
		if next.URL.Host != via[0].URL.Host {
			next.Header.Del("Authorization")
		}
		return nil
	}
	resp, err := client.Do(req)
	if err != nil {
		return res, "", fmt.Errorf("%s: downloading from %s: %w (check HF_ENDPOINT and the network; offline, pass --tokenizer a local folder holding tokenizer.json: docs/tokenizers.md, \"Without the network\")", where, h.endpoint(), err)
	}
	defer resp.Body.Close()
	redirected := hubHeader != nil
	if hubHeader == nil {
		hubHeader = resp.Header
	}
	if resp.StatusCode != http.StatusOK && redirected {
		return res, "", fmt.Errorf("%s: the storage server the Hub sent the download to (%s) answered %d: try again later",
			where, resp.Request.URL.Host, resp.StatusCode)
	}
	if resp.StatusCode != http.StatusOK {
		code := resp.Header.Get("X-Error-Code")
		if resp.StatusCode == http.StatusNotFound && f.optional && (code == "" || code == "EntryNotFound") {
			res.missing = true // the commit is known from tokenizer.json, fetched first
			return res, "", nil
		}
		return res, "", h.statusError(where, repo, rev, resp.StatusCode, code)
	}
	commit := hubHeader.Get("X-Repo-Commit")
	if err := h.checkCommit(where, commit); err != nil {
		return res, "", err
	}
	etag := hubHeader.Get("X-Linked-Etag")
	if etag == "" {
		etag = hubHeader.Get("ETag")
	}
	etag = strings.Trim(strings.TrimPrefix(etag, "W/"), `"`)

	tmp, err := os.CreateTemp(blobs, "download-*.incomplete")
	if err != nil {
		return res, "", fmt.Errorf("%s: %w", where, err)
	}
	res.tmp = tmp.Name()
	sum := sha256.New()
	// An endpoint that sends more than any model's file is refused
	// before it fills the disk.
	limit := maxBytes(f.name)
	n, err := io.Copy(io.MultiWriter(tmp, sum), io.LimitReader(resp.Body, limit+1))
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil && n > limit {
		os.Remove(res.tmp)
		return res, "", fmt.Errorf("%s: %s sent more than %d bytes, over the limit for this file: check HF_ENDPOINT", where, h.endpoint(), limit)
	}
	if err != nil {
		os.Remove(res.tmp)
		return res, "", fmt.Errorf("%s: download cut short: %w (try again)", where, err)
	}
	digest := hex.EncodeToString(sum.Sum(nil))
	// A large file's etag is the SHA-256 of its content: check it.
	if len(etag) == 64 && isHex(etag) && etag != digest {
		os.Remove(res.tmp)
		return res, "", fmt.Errorf("%s: the downloaded file's SHA-256 is %s, the Hub says %s: the download is corrupt (try again)", where, digest, etag)
	}
	if !safeName.MatchString(etag) || strings.Trim(etag, ".") == "" {
		etag = digest // no usable etag: name the blob by its content
	}
	res.etag = etag
	return res, commit, nil
}

func (h *Hub) checkCommit(where, commit string) error {
	if commit == "" {
		return fmt.Errorf("%s: %s sent no X-Repo-Commit header, so it is not a Hugging Face Hub: check HF_ENDPOINT", where, h.endpoint())
	}
	if !safeName.MatchString(commit) || strings.Trim(commit, ".") == "" {
		return fmt.Errorf("%s: %s sent the commit %q, which is not a commit id", where, h.endpoint(), commit)
	}
	return nil
}

// statusError explains a refusal by the Hub and what to do about it.
func (h *Hub) statusError(where, repo, rev string, status int, code string) error {
	page := h.endpoint() + "/" + repo
	var hint string
	switch {
	case code == "GatedRepo":
		hint = fmt.Sprintf("the model is gated: accept its terms at %s, then set HF_TOKEN to a token of that account", page)
	case code == "RepoNotFound" || (status == http.StatusNotFound && code == ""):
		hint = "check the model name; a private or gated model answers this way without a valid token, so set HF_TOKEN if it is one (there is no folder of that name either)"
	case code == "RevisionNotFound":
		hint = fmt.Sprintf("the model has no revision %q: check the branch, tag or commit", rev)
	case code == "EntryNotFound":
		hint = "the model has no such file: it may not ship a Hugging Face tokenizer.json; give a folder that holds one"
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		if h.Token == "" {
			hint = "the model is private or gated: set HF_TOKEN to a token with read access to it"
		} else {
			hint = "the token in HF_TOKEN was refused: check that it is valid and has read access to this model"
		}
	case status == http.StatusTooManyRequests || status >= 500:
		hint = "the Hub is busy or failing: try again later"
	default:
		hint = "check the model name, HF_ENDPOINT and HF_TOKEN"
	}
	if code != "" {
		code = " (" + code + ")"
	}
	return fmt.Errorf("%s: the Hub at %s answered %d%s: %s", where, h.endpoint(), status, code, hint)
}

func isHex(s string) bool {
	_, err := hex.DecodeString(s)
	return err == nil
}

// linkSnapshot points the snapshot entry at its blob, as huggingface_hub
// does (a relative link), replacing any entry atomically; where links are
// not allowed it copies the blob instead.
func linkSnapshot(blob, entry string) error {
	rel, err := filepath.Rel(filepath.Dir(entry), blob)
	if err != nil {
		return err
	}
	tmp := fmt.Sprintf("%s.%d-%x.tmp-link", entry, os.Getpid(), rand.Uint64()) // unique: downloads may run at once
	if err := os.Symlink(rel, tmp); err == nil {
		return os.Rename(tmp, entry)
	}
	data, err := os.ReadFile(blob)
	if err != nil {
		return err
	}
	return writeCacheFile(entry, data)
}

// markMissing records that the model has no such file at commit, where
// huggingface_hub records it (.no_exist/COMMIT/FILE).
func markMissing(repoDir, commit, file string) error {
	return writeCacheFile(filepath.Join(repoDir, ".no_exist", commit, file), nil)
}

// writeCacheFile writes a cache file whole (atomicfile), making its folder.
func writeCacheFile(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return atomicfile.Write(path, data, 0o600)
}
