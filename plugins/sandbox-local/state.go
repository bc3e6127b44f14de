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
)

// state is what a sandbox's state file records: enough for any later plugin
// process to find, check and stop it.
type state struct {
	ID       string            `json:"id"`
	Env      string            `json:"env"`
	PID      int               `json:"pid"`
	PGID     int               `json:"pgid"`
	Port     int               `json:"port"`
	Endpoint string            `json:"endpoint"`
	Labels   map[string]string `json:"labels,omitempty"`
	Started  time.Time         `json:"started"`
	// ProcStart is the leader's start time as /proc/<pid>/stat reports it
	// (clock ticks since boot); it tells our process from a later one that
	// reused the pid.
	ProcStart uint64   `json:"proc_start,omitempty"`
	Root      string   `json:"root"`    // the sandbox's temp dir (removed on terminate)
	WorkDir   string   `json:"workdir"` // the env's working dir, under Root
	EnvDir    string   `json:"env_dir"` // the env's folder in its bundle
	Environ   []string `json:"environ"` // the env's environment, reused by Exec
}

const stateExt = ".json"

// validID keeps ids usable as file names and never paths.
var validID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

func statePath(dir, id string) string { return filepath.Join(dir, id+stateExt) }

// writeState writes st's file atomically (temp file + rename), so a reader
// never sees half a file.
func writeState(dir string, st *state) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("state dir %s: %w", dir, err)
	}
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+st.ID+".*.tmp")
	if err != nil {
		return fmt.Errorf("state file for %s: %w", st.ID, err)
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp.Name(), statePath(dir, st.ID))
	}
	if werr != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("state file for %s: %w", st.ID, werr)
	}
	return nil
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
	if st.ID != id || st.PID <= 0 || st.PGID <= 0 {
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

func removeState(dir, id string) error {
	err := os.Remove(statePath(dir, id))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

func (st *state) sandbox() sandbox.Sandbox {
	raw, _ := json.Marshal(st)
	return sandbox.Sandbox{ID: st.ID, Endpoint: st.Endpoint, Labels: st.Labels, State: raw}
}

// alive reports whether the sandbox's processes still run. The leader is
// ours only if its start time matches: the kernel never reuses a pid while
// a group of that id exists, so a reused pid means our group is gone.
func (st *state) alive() bool {
	start, ok := procStart(st.PID)
	if ok && st.ProcStart != 0 && start != st.ProcStart {
		return false
	}
	return len(groupMembers(st.PGID)) > 0
}
