package pluginhost

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/agentenv/agentenv/sdk/sdktest/wait"

	"github.com/agentenv/agentenv/sdk"
	"github.com/agentenv/agentenv/sdk/reward"
)

// pidOf asks the test plugin behind r for its process id.
func pidOf(t *testing.T, ctx context.Context, r reward.Combiner) int {
	t.Helper()
	pid, err := r.Combine(ctx, map[string]float64{"pid": 0})
	if err != nil {
		t.Fatalf("pid probe: %v", err)
	}
	return int(pid)
}

// gone reports whether process pid no longer runs (absent or a zombie
// waiting for a reaper that is not us).
func gone(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return syscall.Kill(pid, 0) == syscall.ESRCH
	}
	// Field 3, after the parenthesised command name, is the state.
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(fields) > 0 && (fields[0] == "Z" || fields[0] == "X")
}

func waitGone(t *testing.T, pid int) {
	t.Helper()
	wait.Until(t, fmt.Sprintf("process %d to exit", pid), func() bool { return gone(pid) })
}

// waitPolls waits until the host's watcher has done n more rounds.
func waitPolls(t *testing.T, h *Host, n int64) {
	t.Helper()
	from := h.polls.Load()
	wait.Until(t, fmt.Sprintf("%d watcher polls", n), func() bool { return h.polls.Load() >= from+n })
}

func TestKilledPluginIsRestarted(t *testing.T) {
	dir, g := t.TempDir(), newGate(t)
	install(t, rewardV(t, "v1"), dir, "agentenv-reward-v")
	h := newHost(t, dir, nil)
	ctx := ctxTimeout(t, 60*time.Second)
	r, err := h.Reward(ctx, "v", g.config())
	if err != nil {
		t.Fatal(err)
	}
	pid := pidOf(t, ctx, r)

	// Calls in flight when the plugin dies fail at once, naming it.
	const inflight = 4
	errs := make(chan error, inflight)
	for range inflight {
		go func() {
			_, err := r.Combine(ctx, map[string]float64{"hold": 1, "a": 1})
			errs <- err
		}()
	}
	for _, p := range g.arrivals(t, inflight) { // all four reached the plugin
		if p != pid {
			t.Fatalf("a held call reached pid %d, want %d", p, pid)
		}
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	timeout := time.After(guard)
	for range inflight {
		select {
		case err := <-errs:
			if !errors.Is(err, sdk.ErrCrashed) || !strings.Contains(err.Error(), "plugin reward-v") || !strings.Contains(err.Error(), strconv.Itoa(pid)) {
				t.Fatalf("in-flight call error = %v; want sdk.ErrCrashed naming reward-v and pid %d", err, pid)
			}
		case <-timeout:
			t.Fatal("in-flight calls hang after the plugin was killed")
		}
	}

	// The next call is served by a new process.
	got, err := r.Combine(ctx, map[string]float64{"a": 1, "b": 0})
	if err != nil || got != 0.5 {
		t.Fatalf("call after the crash = %v, %v; want 0.5", got, err)
	}
	if pid2 := pidOf(t, ctx, r); pid2 == pid {
		t.Fatalf("still pid %d after the crash", pid)
	}
	if n := h.Restarts(); n != 1 {
		t.Fatalf("Restarts() = %d, want 1", n)
	}
	waitGone(t, pid)
	// List shows the process now serving, and knows the binary already.
	starts := h.starts.Load()
	es, err := h.List(ctx)
	if err != nil || len(es) != 1 || len(es[0].PIDs) != 1 || es[0].PIDs[0] != pidOf(t, ctx, r) {
		t.Fatalf("List = %+v, %v; want the new pid", es, err)
	}
	if h.starts.Load() != starts {
		t.Fatal("List started a process for a binary the host is running")
	}
}

// A crash noticed with no call in flight is repaired before the next call.
func TestIdleCrashIsNoticed(t *testing.T) {
	h, r, ctx := startRewardV1(t, nil)
	pid := pidOf(t, ctx, r)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	wait.Until(t, "the watcher to restart the killed plugin", func() bool { return h.Restarts() > 0 })
	if got := pidOf(t, ctx, r); got == pid {
		t.Fatal("same pid after restart")
	}
}

// A plugin whose binary disappears after a crash stays down, and calls
// fail at once with the reason rather than hang.
func TestRestartFailureFailsFast(t *testing.T) {
	dir := t.TempDir()
	path := install(t, rewardV(t, "v1"), dir, "agentenv-reward-v")
	h := newHost(t, dir, nil)
	ctx := ctxTimeout(t, 60*time.Second)
	r, err := h.Reward(ctx, "v", nil)
	if err != nil {
		t.Fatal(err)
	}
	pid := pidOf(t, ctx, r)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitGone(t, pid)
	var last error
	for range 3 {
		start := time.Now()
		_, last = r.Combine(ctx, map[string]float64{"a": 1})
		if last == nil {
			t.Fatal("call succeeded with the plugin binary gone")
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("call took %s to fail", d)
		}
	}
	if !strings.Contains(last.Error(), "plugin reward-v is down") || !strings.Contains(last.Error(), "not found") {
		t.Fatalf("error = %v; want the plugin named, down, not found", last)
	}
	// Putting the binary back brings it back.
	install(t, rewardV(t, "v2"), dir, "agentenv-reward-v")
	wait.Until(t, "the plugin to come back after its binary returned", func() bool {
		v, err := r.Combine(ctx, map[string]float64{"version": 0})
		return err == nil && v == 2
	})
}

func TestHotSwapUnderLoad(t *testing.T) {
	dir := t.TempDir()
	install(t, rewardV(t, "v1"), dir, "agentenv-reward-v")
	v2, v3 := rewardV(t, "v2"), rewardV(t, "v3")
	h := newHost(t, dir, nil)
	ctx := ctxTimeout(t, 120*time.Second)
	r, err := h.Reward(ctx, "v", nil)
	if err != nil {
		t.Fatal(err)
	}
	info := func() sdk.Info { return r.(sdk.Informer).Info() }

	var (
		stop     atomic.Bool
		calls    atomic.Int64
		failures atomic.Int64
		seen     sync.Map // version number -> true
		wg       sync.WaitGroup
		firstErr atomic.Value
	)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				scores := map[string]float64{"a": float64(g), "b": float64(i % 7)}
				want := (float64(g) + float64(i%7)) / 2
				probe := i%10 == 0
				if probe {
					scores = map[string]float64{"version": 0}
				}
				got, err := r.Combine(ctx, scores)
				calls.Add(1)
				switch {
				case err != nil:
					failures.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
				case probe:
					seen.Store(got, true)
				case got != want:
					failures.Add(1)
					firstErr.CompareAndSwap(nil, fmt.Sprintf("got %v want %v", got, want))
				}
			}
		}()
	}
	waitVersion := func(v string, n float64) {
		t.Helper()
		wait.Until(t, "the swap to "+v, func() bool { return info().Version == v })
		// Calls made after the swap reach the new process.
		if got, err := r.Combine(ctx, map[string]float64{"version": 0}); err != nil || got != n {
			t.Fatalf("after swapping to %s a call answered version %v, %v", v, got, err)
		}
	}
	// Each version serves a good number of calls before the next swap.
	moreCalls := func() {
		t.Helper()
		from := calls.Load()
		wait.Until(t, "200 more calls", func() bool { return calls.Load() >= from+200 })
	}
	moreCalls()
	install(t, v2, dir, "agentenv-reward-v")
	waitVersion("v2", 2)
	moreCalls()
	install(t, v3, dir, "agentenv-reward-v")
	waitVersion("v3", 3)
	moreCalls()
	stop.Store(true)
	wg.Wait()

	if n := failures.Load(); n != 0 {
		t.Fatalf("%d of %d calls failed during the swaps; first: %v", n, calls.Load(), firstErr.Load())
	}
	for _, v := range []float64{1, 2, 3} {
		if _, ok := seen.Load(v); !ok {
			t.Errorf("no call was served by version %v", v)
		}
	}
	if h.Restarts() != 0 {
		t.Errorf("Restarts() = %d; a swap is not a restart", h.Restarts())
	}
	t.Logf("%d calls, 0 failed, across two hot swaps", calls.Load())
}

// A new binary that does not start leaves the old process serving; a
// good one after it is swapped in.
func TestHotSwapToBrokenBinaryKeepsOld(t *testing.T) {
	dir := t.TempDir()
	install(t, rewardV(t, "v1"), dir, "agentenv-reward-v")
	h := newHost(t, dir, nil)
	ctx := ctxTimeout(t, 60*time.Second)
	r, err := h.Reward(ctx, "v", nil)
	if err != nil {
		t.Fatal(err)
	}
	pid := pidOf(t, ctx, r)
	// misbehave, installed as "v", exits before the handshake: it is tried
	// once, then left alone however many polls follow.
	starts := h.starts.Load()
	install(t, build(t, "misbehave", ""), dir, "agentenv-reward-v")
	wait.Until(t, "the broken binary to be tried and rejected", func() bool {
		for _, s := range h.running() {
			s.mu.Lock()
			rejected := s.rejected != (fileStamp{})
			s.mu.Unlock()
			if rejected {
				return true
			}
		}
		return false
	})
	waitPolls(t, h, 5)
	if n := h.starts.Load() - starts; n != 1 {
		t.Fatalf("the broken binary was started %d times, want once", n)
	}
	if got, err := r.Combine(ctx, map[string]float64{"a": 3}); err != nil || got != 3 {
		t.Fatalf("old process after a failed swap: %v, %v", got, err)
	}
	if p := pidOf(t, ctx, r); p != pid {
		t.Fatalf("pid changed from %d to %d after a failed swap", pid, p)
	}
	if err := h.Reload(); err == nil || !strings.Contains(err.Error(), "hot swap of reward-v failed, the old process keeps serving") {
		t.Fatalf("Reload error = %v", err)
	}
	install(t, rewardV(t, "v2"), dir, "agentenv-reward-v")
	wait.Until(t, "a good binary after a broken one to be swapped in", func() bool { return r.(sdk.Informer).Info().Version == "v2" })
	waitGone(t, pid)
}

// A swapped-out process finishes the calls it has before it is stopped.
func TestHotSwapDrainsInFlightCalls(t *testing.T) {
	dir, g := t.TempDir(), newGate(t)
	install(t, rewardV(t, "v1"), dir, "agentenv-reward-v")
	h := newHost(t, dir, func(o *Options) { o.PollInterval = -1 })
	ctx := ctxTimeout(t, 60*time.Second)
	r, err := h.Reward(ctx, "v", g.config())
	if err != nil {
		t.Fatal(err)
	}
	pid := pidOf(t, ctx, r)
	slow := make(chan error, 1)
	go func() {
		v, err := r.Combine(ctx, map[string]float64{"hold": 1, "version": 0})
		if err == nil && v != 1 {
			err = fmt.Errorf("slow call answered version %v, want 1", v)
		}
		slow <- err
	}()
	// The call is held in the old process for as long as the swap takes
	// (the test once slept instead, and a slow build of v2 outlasted it).
	if p := g.arrivals(t, 1)[0]; p != pid {
		t.Fatalf("held call reached pid %d, want %d", p, pid)
	}
	install(t, rewardV(t, "v2"), dir, "agentenv-reward-v")
	if err := h.Reload(); err != nil {
		t.Fatal(err)
	}
	if v, err := r.Combine(ctx, map[string]float64{"version": 0}); err != nil || v != 2 {
		t.Fatalf("new call after reload: %v, %v", v, err)
	}
	if gone(pid) {
		t.Fatal("old process stopped before its call finished")
	}
	select {
	case err := <-slow:
		t.Fatalf("the held call returned before it was released: %v", err)
	default:
	}
	g.release(t)
	if err := <-slow; err != nil {
		t.Fatalf("in-flight call on the old process: %v", err)
	}
	waitGone(t, pid)
}

func TestCloseStopsPlugins(t *testing.T) {
	h, r, ctx := startRewardV1(t, nil)
	pid := pidOf(t, ctx, r)
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	waitGone(t, pid)
	if _, err := r.Combine(ctx, map[string]float64{"a": 1}); !errors.Is(err, ErrClosed) {
		t.Fatalf("call after Close: %v, want ErrClosed", err)
	}
	if _, err := h.Reward(ctx, "v", nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("Reward after Close: %v, want ErrClosed", err)
	}
}

// A plugin that is an sdk.Cleaner has its Cleanup run when the host
// stops it, before its process exits.
func TestClosedPluginCleansUp(t *testing.T) {
	dir := t.TempDir()
	install(t, rewardV(t, "v1"), dir, "agentenv-reward-v")
	h := newHost(t, dir, nil)
	ctx := ctxTimeout(t, 60*time.Second)
	marker := filepath.Join(t.TempDir(), "cleaned")
	config, err := json.Marshal(map[string]string{"cleanup": marker})
	if err != nil {
		t.Fatal(err)
	}
	r, err := h.Reward(ctx, "v", config)
	if err != nil {
		t.Fatal(err)
	}
	pid := pidOf(t, ctx, r)
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("cleaned up before Close: %v", err)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	waitGone(t, pid)
	got, err := os.ReadFile(marker)
	if err != nil || string(got) != strconv.Itoa(pid) {
		t.Fatalf("Cleanup's file: %q, %v; want the plugin's pid %d", got, err, pid)
	}
}

// A plugin killed hard cannot remove its unix socket; the host's Close
// removes the folder that holds them, so nothing is left in TMPDIR.
func TestCloseRemovesSocketsOfKilledPlugins(t *testing.T) {
	h, r, ctx := startRewardV1(t, nil)
	pid := pidOf(t, ctx, r)
	socks, _ := filepath.Glob(filepath.Join(h.sockDir, "plugin*"))
	if len(socks) != 1 {
		t.Fatalf("plugin sockets in %s: %v, want the running plugin's", h.sockDir, socks)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitGone(t, pid)
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(h.sockDir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("socket folder %s after Close: %v, want it gone", h.sockDir, err)
	}
}

// A host killed by SIGKILL cannot stop its plugins; the kernel must.
func TestKilledHostLeavesNoPlugin(t *testing.T) {
	dir := t.TempDir()
	install(t, rewardV(t, "v1"), dir, "agentenv-reward-v")
	cmd := exec.Command(build(t, "hostkill", ""), dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = testWriter{t}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("host printed no plugin pid: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "PID ")))
	if err != nil || gone(pid) {
		t.Fatalf("bad or dead plugin pid from %q: %v", line, err)
	}
	t.Cleanup(func() { // do not leave an orphan behind if the test fails
		if !gone(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	waitGone(t, pid)
	// The killed host's socket folder is what the next host sweeps.
	sweepSockDirs(os.TempDir())
	if left, _ := filepath.Glob(filepath.Join(os.TempDir(), fmt.Sprintf("%s%d-*", sockDirPrefix, cmd.Process.Pid))); len(left) != 0 {
		t.Fatalf("the killed host's socket folder survived a sweep: %v", left)
	}
}

// SIGHUP makes a host with ReloadOnSIGHUP swap in a changed binary even
// when it does not watch binaries.
func TestSIGHUPReloads(t *testing.T) {
	dir := t.TempDir()
	install(t, rewardV(t, "v1"), dir, "agentenv-reward-v")
	h := newHost(t, dir, func(o *Options) { o.PollInterval = -1; o.ReloadOnSIGHUP = true })
	ctx := ctxTimeout(t, 60*time.Second)
	r, err := h.Reward(ctx, "v", nil)
	if err != nil {
		t.Fatal(err)
	}
	install(t, rewardV(t, "v2"), dir, "agentenv-reward-v")
	// An absence: no watcher runs, so nothing may swap. The window only
	// gives a wrong swap the chance to show; load cannot make it fail.
	time.Sleep(200 * time.Millisecond)
	if v := r.(sdk.Informer).Info().Version; v != "v1" {
		t.Fatalf("swapped to %s without a poll or SIGHUP", v)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	wait.Until(t, "SIGHUP to swap in the new binary", func() bool { return r.(sdk.Informer).Info().Version == "v2" })
}
