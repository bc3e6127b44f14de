package main

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

// handle is what a sandbox's handle (sandbox.Sandbox.State) carries: what
// any later plugin process needs to check and stop the sandbox. No secret:
// the env's variables stay in the state file.
type handle struct {
	// Keeper is the pid of the sandbox's keeper (bwrap's parent), and
	// KeeperStart its start time in clock ticks since boot, which tells it
	// from a later process given the same pid.
	Keeper      int    `json:"keeper"`
	KeeperStart uint64 `json:"keeper_start,omitempty"`
	// Init is the host pid of the init of the sandbox's PID namespace:
	// when it dies, the kernel kills every process of the sandbox. PidNS
	// is that namespace's inode, to find the sandbox's processes.
	Init      int    `json:"init,omitempty"`
	InitStart uint64 `json:"init_start,omitempty"`
	PidNS     uint64 `json:"pidns,omitempty"`
	Port      int    `json:"port"` // the endpoint's port on the host
	Root      string `json:"root"` // the sandbox's folder on the host
}

// state is a sandbox's state file: its handle, and what List and Exec need
// besides. It is written (0600) before the keeper starts, so a plugin
// killed at any point leaves a record the next one can reap.
type state struct {
	handle
	ID       string            `json:"id"`
	Env      string            `json:"env"`
	Endpoint string            `json:"endpoint"`
	Labels   map[string]string `json:"labels,omitempty"`
	Started  time.Time         `json:"started"`
	Layout   layout            `json:"layout"`
	// Command is the env's command line, for Exec to resolve its
	// commands the same way.
	Command []string `json:"command"`
	// Environ is the env's environment, reused by Exec. It may hold
	// credentials: it never leaves this file.
	Environ []string `json:"environ"`
}

const stateExt = ".json"

// validID keeps ids usable as file names and never paths.
var validID = regexp.MustCompile(`^bwrap-[0-9a-f]{16}$`)

func statePath(dir, id string) string { return filepath.Join(dir, id+stateExt) }

// writeState writes st's file through a temp file and a rename (0600), so
// no reader sees half of it.
func writeState(dir string, st *state) error {
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	if err := hostenv.WriteFileAtomic(statePath(dir, st.ID), data); err != nil {
		return fmt.Errorf("state file of %s: %w", st.ID, err)
	}
	return nil
}

// readState reads a sandbox's state file; an unknown id is ErrNotFound.
func readState(dir, id string) (*state, error) {
	if !validID.MatchString(id) {
		return nil, fmt.Errorf("%s: sandbox %q: %w", pluginID, id, sandbox.ErrNotFound)
	}
	data, err := os.ReadFile(statePath(dir, id))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: sandbox %q (no state in %s): %w", pluginID, id, dir, sandbox.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: sandbox %q: %w", pluginID, id, err)
	}
	var st state
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, fmt.Errorf("%s: state file %s: %w", pluginID, statePath(dir, id), err)
	}
	if st.ID != id || st.Keeper < 0 || st.Init < 0 || st.Root != sandboxRoot(dir, id) {
		return nil, fmt.Errorf("%s: state file %s is inconsistent (id %q, keeper %d, init %d, root %q)", pluginID, statePath(dir, id), st.ID, st.Keeper, st.Init, st.Root)
	}
	return &st, nil
}

// readStates reads every state file in dir, skipping unreadable ones (one
// being written right now, or a stranger's file).
func readStates(dir string) ([]*state, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s: listing %s: %w", pluginID, dir, err)
	}
	var out []*state
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), stateExt)
		if e.IsDir() || !ok || !validID.MatchString(id) {
			continue
		}
		if st, err := readState(dir, id); err == nil {
			out = append(out, st)
		}
	}
	return out, nil
}

func (st *state) sandbox() sandbox.Sandbox {
	raw, _ := json.Marshal(st.handle)
	return sandbox.Sandbox{ID: st.ID, Endpoint: st.Endpoint, Labels: hostenv.CopyLabels(st.Labels), State: raw}
}

// fromHandle rebuilds what a handle carries, for a sandbox whose state
// file is gone. ok is false for a handle with no usable state.
func fromHandle(sb sandbox.Sandbox) (*state, bool) {
	var h handle
	if len(sb.State) == 0 || json.Unmarshal(sb.State, &h) != nil || h.Keeper <= 0 || !validID.MatchString(sb.ID) {
		return nil, false
	}
	return &state{handle: h, ID: sb.ID, Endpoint: sb.Endpoint}, true
}

// bwrapInfo is what bwrap writes to --info-fd.
type bwrapInfo struct {
	ChildPID int    `json:"child-pid"`
	PidNS    uint64 `json:"pid-namespace"`
}

func infoPath(root string) string { return filepath.Join(root, "info.json") }

// learnInit fills in the sandbox's init from bwrap's info file, when the
// state lacks it (a plugin killed before recording it). ok is false until
// bwrap has written it.
func (st *state) learnInit() bool {
	if st.Init > 0 {
		return true
	}
	if st.Root == "" {
		return false
	}
	data, err := os.ReadFile(infoPath(st.Root))
	if err != nil {
		return false
	}
	var info bwrapInfo
	if json.Unmarshal(data, &info) != nil || info.ChildPID <= 0 {
		return false
	}
	// The pid is the sandbox's init only while it is in the sandbox's
	// namespace: a file outliving its sandbox must not name a stranger.
	if ns, ok := pidNamespace(info.ChildPID); !ok || ns != info.PidNS {
		return false
	}
	start, ok := procStart(info.ChildPID)
	if !ok {
		return false
	}
	st.Init, st.InitStart, st.PidNS = info.ChildPID, start, info.PidNS
	return true
}
