package pluginhost

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/agentenv/agentenv/sdk"
	"github.com/agentenv/agentenv/sdk/atomicfile"
)

// fileStamp identifies a version of a file cheaply: if size, mtime and
// inode are unchanged the contents are taken to be unchanged.
type fileStamp struct {
	Size  int64  `json:"size"`
	MTime int64  `json:"mtime_ns"`
	Inode uint64 `json:"inode"`
}

func stampOf(fi os.FileInfo) fileStamp {
	return fileStamp{Size: fi.Size(), MTime: fi.ModTime().UnixNano(), Inode: inodeOf(fi)}
}

// statFile stamps the file at path (following symlinks).
func statFile(path string) (fileStamp, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}, err
	}
	return stampOf(fi), nil
}

type cachedFile struct {
	fileStamp
	SHA256 string `json:"sha256"`
}

// cacheFile is the fingerprint cache as stored on disk.
type cacheFile struct {
	Version int                   `json:"version"`
	Files   map[string]cachedFile `json:"files"` // path -> stamp and hash
	// Infos maps infoKey(sha256, args) to the Info the plugin answered.
	Infos map[string]sdk.Info `json:"infos"`
}

const cacheVersion = 1

// fingerprints caches binaries' sha256 by path and stamp, and plugins'
// Info by sha256 and arguments, so `plugins list` only launches binaries
// it has not seen before.
type fingerprints struct {
	path string // "" = in memory only

	mu    sync.Mutex
	data  cacheFile
	dirty bool
}

func loadFingerprints(path string) *fingerprints {
	f := &fingerprints{path: path, data: cacheFile{Version: cacheVersion}}
	if path != "" {
		if b, err := os.ReadFile(path); err == nil {
			var d cacheFile
			// A cache from another version or a corrupt one is dropped: it
			// only saves time.
			if json.Unmarshal(b, &d) == nil && d.Version == cacheVersion {
				f.data = d
			}
		}
	}
	if f.data.Files == nil {
		f.data.Files = map[string]cachedFile{}
	}
	if f.data.Infos == nil {
		f.data.Infos = map[string]sdk.Info{}
	}
	return f
}

func infoKey(sum string, args []string) string {
	return sum + " " + strings.Join(args, " ")
}

// hash returns the sha256 of the file at path, from the cache when its
// stamp is unchanged, and the stamp it saw.
func (f *fingerprints) hash(path string) (string, fileStamp, error) {
	st, err := statFile(path)
	if err != nil {
		return "", fileStamp{}, err
	}
	f.mu.Lock()
	c, ok := f.data.Files[path]
	f.mu.Unlock()
	if ok && c.fileStamp == st {
		return c.SHA256, st, nil
	}
	sum, err := hashFile(path)
	if err != nil {
		return "", fileStamp{}, err
	}
	// Stamp again: a file being written while hashed gets no cache entry.
	if st2, err := statFile(path); err == nil && st2 == st {
		f.mu.Lock()
		f.data.Files[path] = cachedFile{fileStamp: st, SHA256: sum}
		f.dirty = true
		f.mu.Unlock()
	}
	return sum, st, nil
}

func hashFile(path string) (string, error) {
	fh, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer fh.Close()
	h := sha256.New()
	if _, err := io.Copy(h, fh); err != nil {
		return "", fmt.Errorf("hash %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func (f *fingerprints) info(sum string, args []string) (sdk.Info, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	i, ok := f.data.Infos[infoKey(sum, args)]
	if string(bytes.TrimSpace(i.ConfigSchema)) == "null" {
		i.ConfigSchema = nil // an Info with no schema, as the plugin answered it
	}
	return i, ok
}

func (f *fingerprints) setInfo(sum string, args []string, info sdk.Info) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.data.Infos[infoKey(sum, args)] = info
	f.dirty = true
}

// save writes the cache if it changed, dropping entries for files that
// are gone and Infos no file refers to. It writes a temp file and renames
// it, so a reader never sees half a cache.
func (f *fingerprints) save() error {
	if f.path == "" {
		return nil
	}
	f.mu.Lock()
	if !f.dirty {
		f.mu.Unlock()
		return nil
	}
	live := map[string]bool{}
	for p, c := range f.data.Files {
		if _, err := os.Stat(p); err != nil {
			delete(f.data.Files, p)
			continue
		}
		live[c.SHA256] = true
	}
	for k := range f.data.Infos {
		if sum, _, _ := strings.Cut(k, " "); !live[sum] {
			delete(f.data.Infos, k)
		}
	}
	b, err := json.MarshalIndent(f.data, "", "  ")
	f.dirty = false
	f.mu.Unlock()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(f.path), 0o755); err != nil {
		return fmt.Errorf("write %s: %w", f.path, err)
	}
	return atomicfile.Write(f.path, b, 0o600)
}

// DefaultCachePath is where the fingerprint cache lives unless
// Options.CachePath says otherwise: <user cache dir>/agentenv/plugins.json.
func DefaultCachePath() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "agentenv", "plugins.json")
}
