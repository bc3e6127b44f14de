package main

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/agentenv/agentenv/sdk/sandbox"
	"github.com/agentenv/agentenv/sdk/sandbox/hostenv"
)

// killWait bounds how long a killed sandbox may take to disappear.
const killWait = 5 * time.Second

// Terminate stops a sandbox and removes its folder and state. The handle is
// enough: it stops sandboxes an earlier plugin process started, even when
// their state file is gone. A sandbox already gone is ErrNotFound.
func (p *plugin) Terminate(ctx context.Context, sb sandbox.Sandbox) error {
	cfg := p.config()
	st, err := readState(cfg.StateDir, sb.ID)
	if err != nil {
		h, ok := fromHandle(sb)
		if !ok || !h.alive() {
			return err // ErrNotFound, naming the id
		}
		st = h
	} else if st.Keeper == 0 && !p.adopt(st, time.Duration(cfg.ReadyTimeout)) {
		p.forget(st)
		return nil // recorded, but its keeper never started
	}
	if err := p.stop(ctx, st, time.Duration(cfg.Grace)); err != nil {
		return fmt.Errorf("%s: terminating %s: %w", pluginID, sb.ID, err)
	}
	p.forget(st)
	p.log.Info("terminated", "id", sb.ID, "env", st.Env)
	return nil
}

// alive reports whether any process of the sandbox runs.
func (st *state) alive() bool {
	st.learnInit()
	return running(st.Keeper, st.KeeperStart) || running(st.Init, st.InitStart)
}

// stop ends a sandbox: SIGTERM to every process in it, then, after grace
// (at once if ctx ends first), SIGKILL to its init, which makes the kernel
// kill everything left in its PID namespace, however the processes hid
// (a new session, a double fork), and to its keeper.
func (p *plugin) stop(ctx context.Context, st *state, grace time.Duration) error {
	st.learnInit()
	initUp := running(st.Init, st.InitStart)
	keeperUp := running(st.Keeper, st.KeeperStart)
	if !initUp && !keeperUp {
		return nil
	}
	gone := func() bool {
		return !running(st.Init, st.InitStart) && !running(st.Keeper, st.KeeperStart)
	}
	// Only while init runs does the namespace's inode name this sandbox.
	// Without it there is no env yet to stop gracefully.
	if initUp {
		for _, pid := range members(st.PidNS) {
			if pid != st.Init {
				_ = syscall.Kill(pid, syscall.SIGTERM)
			}
		}
		if waitUntil(ctx, gone, grace) {
			return nil
		}
	}
	if running(st.Init, st.InitStart) {
		p.log.Warn("env ignored SIGTERM; killing its sandbox", "id", st.ID, "grace", grace)
		_ = syscall.Kill(st.Init, syscall.SIGKILL)
	}
	if running(st.Keeper, st.KeeperStart) {
		_ = syscall.Kill(st.Keeper, syscall.SIGKILL)
	}
	if waitUntil(context.Background(), gone, killWait) {
		return nil
	}
	return fmt.Errorf("its processes (keeper %d, init %d) still run %s after SIGKILL", st.Keeper, st.Init, killWait)
}

// waitUntil polls cond until it holds (true), d passes or ctx ends (false).
func waitUntil(ctx context.Context, cond func() bool, d time.Duration) bool {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	wait := time.Millisecond
	for {
		if cond() {
			return true
		}
		poll := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			poll.Stop()
			return cond()
		case <-deadline.C:
			poll.Stop()
			return cond()
		case <-poll.C:
		}
		wait = min(wait*2, 50*time.Millisecond)
	}
}

// List returns the live sandboxes whose labels include labels. Sandboxes
// that are gone are cleaned up on the way; one whose deploy was cut short
// before it recorded its keeper is found by the keeper's command line.
func (p *plugin) List(_ context.Context, labels map[string]string) ([]sandbox.Sandbox, error) {
	cfg := p.config()
	states, err := readStates(cfg.StateDir)
	if err != nil {
		return nil, err
	}
	var out []sandbox.Sandbox
	for _, st := range states {
		if st.Keeper == 0 && !p.adopt(st, time.Duration(cfg.ReadyTimeout)) {
			continue
		}
		if !st.alive() {
			p.log.Debug("removing a sandbox that is gone", "id", st.ID)
			p.forget(st)
			continue
		}
		if hostenv.LabelsMatch(st.Labels, labels) {
			out = append(out, st.sandbox())
		}
	}
	return out, nil
}

// adopt completes the state of a sandbox recorded before its keeper
// started: true when the keeper runs; false when it never started (and its
// files are removed once no deploy can still be starting it).
func (p *plugin) adopt(st *state, readyTimeout time.Duration) bool {
	p.mu.Lock()
	_, deploying := p.mine[st.ID]
	p.mu.Unlock()
	if deploying {
		return false
	}
	if pid, ok := findKeeper(st.Root); ok {
		st.Keeper = pid
		st.KeeperStart, _ = procStart(pid)
		return true
	}
	if time.Since(st.Started) > readyTimeout {
		p.forget(st)
	}
	return false
}

// forget removes every trace of a sandbox that has stopped.
func (p *plugin) forget(st *state) {
	cfg := p.config()
	// Only a folder named as the state dir names it is removed: a handle
	// made up by a caller cannot point this at another folder.
	if st.Root != "" && st.Root == sandboxRoot(cfg.StateDir, st.ID) {
		if err := os.RemoveAll(st.Root); err != nil {
			p.log.Warn("removing a sandbox's folder", "id", st.ID, "dir", st.Root, "error", err)
		}
	}
	if err := os.Remove(statePath(cfg.StateDir, st.ID)); err != nil && !os.IsNotExist(err) {
		p.log.Warn("removing a sandbox's state", "id", st.ID, "error", err)
	}
	if st.Port != 0 {
		ports(cfg.StateDir).Release(st.Port, st.ID)
	}
	p.mu.Lock()
	delete(p.mine, st.ID)
	p.mu.Unlock()
}
