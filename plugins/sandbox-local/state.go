package local

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/agentenv/agentenv/sdk/sandbox"
	"github.com/agentenv/agentenv/sdk/sandbox/hostenv"
)

// handle is what a sandbox's handle (sandbox.Sandbox.State) carries:
// enough for any later plugin process to check and stop it, and no secret
// (the env's variables stay in the state file).
type handle struct {
	PID  int `json:"pid"`
	PGID int `json:"pgid"`
	// ProcStart is the leader's start time as /proc/<pid>/stat reports it
	// (clock ticks since boot); it tells our process from a later one that
	// reused the pid.
	ProcStart uint64 `json:"proc_start,omitempty"`
	Port      int    `json:"port"`
	Root      string `json:"root"` // the sandbox's temp dir (removed on terminate)
}

// state is what a sandbox's state file records: its handle, and what Exec
// and List need besides. The file is written (0600, in the plugin's state
// dir) before the env starts, so a plugin killed at any point leaves a
// record the next one can reap; PID is 0 until the env has started.
type state struct {
	handle
	ID       string            `json:"id"`
	Env      string            `json:"env"`
	Endpoint string            `json:"endpoint"`
	Labels   map[string]string `json:"labels,omitempty"`
	Started  time.Time         `json:"started"`
	// Owner is the plugin process that recorded the sandbox (pid and its
	// start time): a state without a started env whose owner is gone was
	// a deploy cut short, and is removed at once.
	Owner      int      `json:"owner,omitempty"`
	OwnerStart uint64   `json:"owner_start,omitempty"`
	WorkDir    string   `json:"workdir"` // the env's working dir, under Root
	EnvDir     string   `json:"env_dir"` // the env's folder in its bundle
	Environ    []string `json:"environ"` // the env's environment, reused by Exec; never in a handle
}

const stateExt = ".json"

// validID keeps ids usable as file names and never paths.
var validID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

func statePath(dir, id string) string { return filepath.Join(dir, id+stateExt) }

// writeState writes st's file atomically (temp file + rename, 0600), so a
// reader never sees half a file.
func writeState(dir string, st *state) error {
	data, err := json.Marshal(st)
	if err != nil {
		return err
	}
	if err := hostenv.WriteFileAtomic(statePath(dir, st.ID), data); err != nil {
		return fmt.Errorf("state file for %s: %w", st.ID, err)
	}
	return nil
}

// createState writes a new sandbox's state file, once, before its env
// starts. Its id is new, so the file is created exclusive (0600), or a
// spare renamed to it where none is there, and filled by one write, with
// no temp file and rename: a reader that opens it in between finds it
// empty (or a spare's one byte) and skips it (readStates), as it skips a
// state not yet written, and no one else reads a sandbox's state before
// its deploy returns.
func (p *Plugin) createState(dir string, st *state) error {
	data, err := json.Marshal(st)
	if err != nil {
		return err
	}
	path := statePath(dir, st.ID)
	var f *os.File
	took := p.spareStates.takeTo(path)
	if took { // a spare of one byte, renamed to it: written over
		f, err = os.OpenFile(path, os.O_WRONLY, 0)
	}
	if !took || errors.Is(err, fs.ErrNotExist) {
		f, err = createExcl(path)
	}
	if err != nil {
		return fmt.Errorf("state file for %s: %w", st.ID, err)
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return fmt.Errorf("state file for %s: %w", st.ID, err)
	}
	return nil
}

// createExcl creates the file at path (0600) for writing, failing where
// it exists; its folder is made (0700) on first use rather than checked
// before every file.
func createExcl(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrNotExist) {
		if err = os.MkdirAll(filepath.Dir(path), 0o700); err == nil {
			f, err = os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		}
	}
	return f, err
}

// readState reads one sandbox's state; an unknown id wraps ErrNotFound.
func readState(dir, id string) (*state, error) {
	if !validID.MatchString(id) {
		return nil, fmt.Errorf("sandbox-local: sandbox %q: %w", id, sandbox.ErrNotFound)
	}
	data, err := os.ReadFile(statePath(dir, id))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("sandbox-local: sandbox %q (no state in %s): %w", id, dir, sandbox.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sandbox-local: sandbox %q: %w", id, err)
	}
	var st state
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, fmt.Errorf("sandbox-local: state file %s: %w", statePath(dir, id), err)
	}
	if st.ID != id || st.PID < 0 || st.PGID < 0 {
		return nil, fmt.Errorf("sandbox-local: state file %s: inconsistent (id %q, pid %d, pgid %d)", statePath(dir, id), st.ID, st.PID, st.PGID)
	}
	return &st, nil
}

// readStates reads every state file in dir; unreadable ones are skipped
// (a sandbox being written right now, or a foreign file).
func readStates(dir string) ([]*state, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("sandbox-local: listing state dir: %w", err)
	}
	var out []*state
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, stateExt) || strings.HasPrefix(name, ".") {
			continue
		}
		st, err := readState(dir, strings.TrimSuffix(name, stateExt))
		if err != nil {
			continue
		}
		out = append(out, st)
	}
	return out, nil
}

// removeState removes a sandbox's state file: with keep, kept as a spare
// where it can be.
func (p *Plugin) removeState(dir, id string, keep bool) error {
	path := statePath(dir, id)
	if _, err := os.Lstat(path); err == nil && keep && p.recycleState(path) {
		return nil
	}
	err := os.Remove(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

func (st *state) sandbox() sandbox.Sandbox {
	raw, _ := json.Marshal(st.handle)
	return sandbox.Sandbox{ID: st.ID, Endpoint: st.Endpoint, Labels: hostenv.CopyLabels(st.Labels), State: raw}
}

// fromHandle rebuilds the part of a state a handle carries. ok is false
// for a handle without state (one made by hand from an id).
func fromHandle(sb sandbox.Sandbox) (*state, bool) {
	var h handle
	if len(sb.State) == 0 || json.Unmarshal(sb.State, &h) != nil || h.PGID <= 0 || !validID.MatchString(sb.ID) {
		return nil, false
	}
	return &state{handle: h, ID: sb.ID, Endpoint: sb.Endpoint}, true
}

// alive reports whether the sandbox's processes still run. The leader is
// ours only if its start time matches: the kernel never reuses a pid while
// a group of that id exists, so a reused pid means our group is gone.
func (h handle) alive() bool {
	if h.PGID <= 0 {
		return false
	}
	start, ok := procStart(h.PID)
	if ok && h.ProcStart != 0 && start != h.ProcStart {
		return false
	}
	return len(groupMembers(h.PGID)) > 0
}
