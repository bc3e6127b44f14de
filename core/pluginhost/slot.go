package pluginhost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/agentenv/agentenv/sdk"
)

// slot is one configured plugin the host serves: the process currently
// taking its calls, and how it is restarted and swapped. Every proxy
// returned for the same kind, name and config shares a slot.
type slot struct {
	h      *Host
	kind   sdk.Kind
	name   string
	config json.RawMessage
	log    hclog.Logger

	mu  sync.Mutex
	cur *instance // nil while the plugin is down
	// attempt is closed when the pending (re)start attempt ends; nil when
	// none is pending.
	attempt   chan struct{}
	attemptAt time.Time // when the pending attempt runs
	lastErr   error     // why the plugin is down
	failures  int       // crashes and failed restarts in a row, for backoff
	swapping  bool
	rejected  fileStamp // a binary version that failed to swap in; not retried
	pending   fileStamp // a changed binary seen once; swapped when seen unchanged again
	closed    bool
	lastInfo  sdk.Info
}

func (s *slot) id() string { return string(s.kind) + "-" + s.name }

// launch starts, checks and configures a new process for the slot,
// resolving the binary afresh so a restart picks up a replaced one.
func (s *slot) launch(ctx context.Context) (*instance, error) {
	c, err := s.h.resolve(s.kind, s.name)
	if err != nil {
		return nil, err
	}
	in, err := s.h.start(ctx, c, passEnvOf(s.config), false)
	if err != nil {
		return nil, fmt.Errorf("plugin %s (%s): %w", s.id(), c.source(), err)
	}
	if err := in.configure(ctx, s.config); err != nil {
		in.kill()
		return nil, fmt.Errorf("plugin %s (%s): %w", s.id(), c.source(), err)
	}
	if in.local {
		s.log.Info("plugin runs in this process", "version", in.info.Version, "source", c.source())
		return in, nil
	}
	s.h.fp.setInfo(in.sum, c.args, in.info) // `plugins list` need not start it again
	s.log.Info("plugin started", "pid", in.pid, "version", in.info.Version, "source", c.source())
	return in, nil
}

// maxWaitForRestart is how far off a scheduled restart may be for a call
// to wait for it rather than fail at once.
const maxWaitForRestart = 2 * time.Second

// acquire returns the instance to call, counted in; the caller must
// release it. While the plugin is restarting it waits for the restart
// (within ctx); while it is down for longer it fails at once.
func (s *slot) acquire(ctx context.Context) (*instance, error) {
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return nil, fmt.Errorf("plugin %s: %w", s.id(), ErrClosed)
		}
		if in := s.cur; in != nil {
			if !in.exited() && in.acquire() {
				s.mu.Unlock()
				return in, nil
			}
			s.crashedLocked(in, nil)
		}
		wait, at, lastErr := s.attempt, s.attemptAt, s.lastErr
		s.mu.Unlock()
		if wait == nil || time.Until(at) > maxWaitForRestart {
			return nil, fmt.Errorf("plugin %s is down: %w", s.id(), lastErr)
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, fmt.Errorf("plugin %s is restarting after: %v: %w", s.id(), lastErr, ctx.Err())
		}
		// An attempt that failed leaves the slot down; report that rather
		// than wait for the next one.
		s.mu.Lock()
		down, err := s.cur == nil, s.lastErr
		s.mu.Unlock()
		if down {
			return nil, fmt.Errorf("plugin %s is down: %w", s.id(), err)
		}
	}
}

// failed inspects a call's error. A plugin that cannot be reached has
// crashed (or was stopped): the error says so and names the plugin, and
// if it is the current process a restart is scheduled. Other errors are
// the plugin's own and pass through unchanged.
func (s *slot) failed(ctx context.Context, in *instance, err error) error {
	if err == nil || !unreachable(err) || ctx.Err() != nil {
		return err
	}
	s.mu.Lock()
	current, closed := s.cur == in, s.closed
	if current {
		s.crashedLocked(in, err)
	}
	s.mu.Unlock()
	if closed {
		return fmt.Errorf("plugin %s (pid %d) was stopped during the call: %w: %w", s.id(), in.pid, ErrClosed, err)
	}
	if !current && !in.exited() {
		return fmt.Errorf("plugin %s (pid %d) was stopped during the call: %w: %w", s.id(), in.pid, sdk.ErrCrashed, err)
	}
	return fmt.Errorf("plugin %s (pid %d) crashed during the call and is being restarted: %w: %w", s.id(), in.pid, sdk.ErrCrashed, err)
}

// unreachable reports whether err means the plugin process could not be
// reached rather than that it refused the call.
func unreachable(err error) bool {
	var pe *sdk.PluginError
	return errors.As(err, &pe) && pe.Unavailable()
}

// crashedLocked takes a dead process out of service and schedules its
// restart with backoff. s.mu is held.
func (s *slot) crashedLocked(in *instance, cause error) {
	if s.cur != in {
		return
	}
	s.cur = nil
	why := "its process exited"
	if cause != nil {
		why = "a call could not reach it: " + cause.Error()
	}
	if time.Since(in.started) > stableAfter {
		s.failures = 0
	}
	s.failures++
	s.lastErr = fmt.Errorf("%w (pid %d): %s", sdk.ErrCrashed, in.pid, why)
	s.log.Error("plugin crashed; restarting", "pid", in.pid, "why", why, "stderr", lastLine(in.stderr.String()))
	s.h.wg.Add(1)
	go func() { // reaps it and anything left in its process group
		defer s.h.wg.Done()
		in.kill()
	}()
	s.scheduleLocked()
}

// stableAfter is how long a process must have run for its crash to reset
// the backoff.
const stableAfter = time.Minute

// backoff is the delay before restart attempt n (1-based) in a row: the
// first is immediate, then 250ms doubling up to 30s.
func backoff(n int) time.Duration {
	if n <= 1 {
		return 0
	}
	d := 250 * time.Millisecond
	for i := 2; i < n && d < 30*time.Second; i++ {
		d *= 2
	}
	return min(d, 30*time.Second)
}

// scheduleLocked starts a restart attempt after the backoff delay, unless
// one is pending. s.mu is held.
func (s *slot) scheduleLocked() {
	if s.attempt != nil || s.closed {
		return
	}
	delay := backoff(s.failures)
	done := make(chan struct{})
	s.attempt, s.attemptAt = done, time.Now().Add(delay)
	s.h.wg.Add(1)
	go func() {
		defer s.h.wg.Done()
		select {
		case <-time.After(delay):
		case <-s.h.done:
		}
		var in *instance
		err := ErrClosed
		if !s.h.isClosed() {
			s.h.restarts.Add(1)
			ctx, cancel := context.WithTimeout(context.Background(), s.h.opts.StartTimeout+5*time.Second)
			in, err = s.launch(ctx)
			cancel()
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		s.attempt = nil
		defer close(done)
		switch {
		case s.closed:
			if in != nil {
				go in.kill()
			}
		case err != nil:
			s.failures++
			s.lastErr = fmt.Errorf("restart failed: %w", err)
			s.log.Error("plugin restart failed", "error", err, "next_in", backoff(s.failures))
			s.scheduleLocked()
		default:
			s.cur, s.lastErr = in, nil
			s.log.Info("plugin restarted", "pid", in.pid)
		}
	}()
}

// swap starts a new process from the plugin's current binary and, once it
// is up and configured, routes new calls to it and retires the old one
// after its calls drain. If the new one fails the old keeps serving.
func (s *slot) swap(ctx context.Context, why string) error {
	s.mu.Lock()
	if s.swapping || s.closed {
		s.mu.Unlock()
		return nil
	}
	s.swapping = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.swapping = false
		s.mu.Unlock()
	}()

	s.log.Info("hot swap: starting the new plugin", "why", why)
	in, err := s.launch(ctx)
	s.mu.Lock()
	if err != nil {
		if c, rerr := s.h.resolve(s.kind, s.name); rerr == nil {
			s.rejected, _ = statFile(c.path)
		}
		s.mu.Unlock()
		s.log.Error("hot swap failed; the old plugin keeps serving", "error", err)
		return fmt.Errorf("hot swap of %s failed, the old process keeps serving: %w", s.id(), err)
	}
	if s.closed {
		s.mu.Unlock()
		in.kill()
		return fmt.Errorf("plugin %s: %w", s.id(), ErrClosed)
	}
	old := s.cur
	s.cur, s.lastErr, s.pending, s.rejected = in, nil, fileStamp{}, fileStamp{}
	s.mu.Unlock()
	s.log.Info("hot swap: new calls go to the new plugin", "pid", in.pid, "version", in.info.Version)
	if old != nil {
		s.h.retire(old, s.log)
	}
	return nil
}

// needsSwap compares the slot's binary on disk with the running one. A
// change is acted on once it is seen twice in a row unchanged, so a binary
// still being written is not started.
func (s *slot) needsSwap() (bool, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	in := s.cur
	if in == nil || in.local || s.swapping || s.closed {
		return false, ""
	}
	st, err := statFile(in.cand.path)
	if err != nil || st == in.stamp || st == s.rejected {
		return false, ""
	}
	if st != s.pending {
		s.pending = st
		return false, ""
	}
	sum, err := hashFile(in.cand.path)
	if err != nil {
		return false, ""
	}
	if sum == in.sum { // touched, not changed
		in.stamp, s.pending = st, fileStamp{}
		return false, ""
	}
	return true, "binary " + in.cand.path + " changed"
}

// close stops taking calls and kills the process.
func (s *slot) close() {
	s.mu.Lock()
	s.closed = true
	in := s.cur
	s.cur = nil
	s.mu.Unlock()
	if in != nil {
		in.retire()
		in.kill()
	}
}
