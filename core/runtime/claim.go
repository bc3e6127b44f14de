package runtime

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// A server's claim says it is running: a lock file named after its id in
// the servers folder, held (flock, shared) for as long as the runtime is
// open. The kernel drops the lock when the process dies, SIGKILL included,
// so a claim file nobody holds is the mark of a server that died without
// tearing down, and its sandboxes are reaped. A server id with no claim
// file here is unknown (another user's, another machine's) and is left
// alone unless asked.

// DefaultServersDir is where claims live when Options leave it empty.
func DefaultServersDir() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	return filepath.Join(dir, "agentenv", "servers")
}

const claimExt = ".lock"

// validServerID keeps server ids usable as file names.
var validServerID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

func claimPath(dir, id string) (string, error) {
	if !validServerID.MatchString(id) {
		return "", fmt.Errorf("server id %q: use letters, digits and . _ - only", id)
	}
	return filepath.Join(dir, id+claimExt), nil
}

// claim is a held claim.
type claim struct {
	f    *os.File
	path string
}

// Claim marks server id as running until Release. Several processes may
// hold one id's claim at once (tools that share an id, like the GridSim
// baselines).
func Claim(dir, id string) (*claim, error) {
	path, err := claimPath(dir, id)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("server claim: %w", err)
	}
	for range 10 {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return nil, fmt.Errorf("server claim: %w", err)
		}
		if err := lockShared(f); err != nil {
			f.Close()
			return nil, fmt.Errorf("server claim %s: %w", path, err)
		}
		// A releaser may have removed the file between our open and lock:
		// the lock must be on the file the path names now.
		if sameFile(f, path) {
			return &claim{f: f, path: path}, nil
		}
		f.Close()
	}
	return nil, fmt.Errorf("server claim %s: the file keeps being replaced", path)
}

// Release drops the claim. With clean (every sandbox of the server torn
// down) its file goes too when no one else holds it; otherwise the file
// stays, unheld, marking the server dead, so the next start (or
// `agentenv sandboxes reap`) reaps what it left.
func (c *claim) Release(clean bool) error {
	if c == nil || c.f == nil {
		return nil
	}
	defer func() { c.f = nil }()
	if clean && tryLockExclusive(c.f) {
		_ = os.Remove(c.path)
	}
	return c.f.Close()
}

// ServerState is what the servers folder says of a server id.
type ServerState int

const (
	ServerUnknown ServerState = iota // no claim file: not a server of this folder
	ServerRunning                    // its claim is held
	ServerDead                       // its claim file is there, held by no one
)

func (s ServerState) String() string {
	return [...]string{"unknown", "running", "dead"}[s]
}

// State reports whether server id runs.
func State(dir, id string) (ServerState, error) {
	path, err := claimPath(dir, id)
	if err != nil {
		return ServerUnknown, nil // no server of ours has such an id
	}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return ServerUnknown, nil
	}
	if err != nil {
		return ServerUnknown, fmt.Errorf("server %s: %w", id, err)
	}
	defer f.Close()
	if !tryLockExclusive(f) {
		return ServerRunning, nil
	}
	return ServerDead, nil
}

// forget removes a dead server's claim file (after its sandboxes were
// reaped), unless a server of that id started meanwhile.
func forget(dir, id string) {
	path, err := claimPath(dir, id)
	if err != nil {
		return
	}
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	if tryLockExclusive(f) && sameFile(f, path) {
		_ = os.Remove(path)
	}
}

// sameFile reports whether f is the file path names.
func sameFile(f *os.File, path string) bool {
	a, err1 := f.Stat()
	b, err2 := os.Stat(path)
	return err1 == nil && err2 == nil && os.SameFile(a, b)
}

// ServerIDs lists the ids of the claims in dir (running or dead).
func ServerIDs(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("servers folder: %w", err)
	}
	var ids []string
	for _, e := range entries {
		if id, ok := strings.CutSuffix(e.Name(), claimExt); ok && validServerID.MatchString(id) {
			ids = append(ids, id)
		}
	}
	return ids, nil
}
