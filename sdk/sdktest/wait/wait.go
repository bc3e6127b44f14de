// Package wait is how agentenv's tests, and a plugin's, wait for
// something to happen: poll a condition until it holds, and on timeout
// fail with what was awaited and the reason the condition last gave.
//
//	wait.For(t, "the env process to exit", func() error {
//		if alive(pid) {
//			return fmt.Errorf("pid %d still answers signal 0", pid)
//		}
//		return nil
//	})
//
// The timeout is a guard against a broken test, not a guess of how long
// things take: it is long (a minute), a busy machine can stretch it with
// $AGENTENV_TEST_SCALE, and it ends before the test binary's -timeout so
// the failure names the condition instead of dumping goroutines. Tests
// that are about time itself (a backoff, an idle timeout) belong in a
// testing/synctest bubble, where For works as well and takes no wall time.
//
// It imports only the standard library, so any module of agentenv (and a
// plugin author's) can use it.
package wait

import (
	"errors"
	"os"
	"strconv"
	"time"
)

// T is the part of testing.TB that For uses; *testing.T and *testing.B
// are Ts. Call For from the test's goroutine, as Fatalf requires.
type T interface {
	Helper()
	Fatalf(format string, args ...any)
}

// ScaleVar names the environment variable that multiplies every
// timeout (a number, at least 1): a machine too busy for the default
// minute sets it rather than each test growing its own guard.
const ScaleVar = "AGENTENV_TEST_SCALE"

// DefaultTimeout is how long For polls before it fails, before scaling.
const DefaultTimeout = time.Minute

// maxInterval is the longest pause between two checks; the first pauses
// are shorter, so a condition that is nearly true costs almost no time.
const maxInterval = 20 * time.Millisecond

// Option changes one wait.
type Option func(*config)

type config struct {
	timeout, interval time.Duration
}

// Timeout sets the unscaled guard (DefaultTimeout if not given). Only a
// condition that is slow by nature (a cluster deleting pods) wants a
// longer one; a shorter one is a timed test, which agentenv avoids.
func Timeout(d time.Duration) Option { return func(c *config) { c.timeout = d } }

// Every sets the longest pause between checks (20ms if not given): for a
// check that costs something, such as an HTTP request or a kubectl call.
func Every(d time.Duration) Option { return func(c *config) { c.interval = d } }

// errFalse is what Until's condition gives when it does not hold.
var errFalse = errors.New("the condition was still false")

// For calls cond until it returns nil. If it has not once the timeout
// passed, For fails t with what it waited for, how long, how many checks
// were made and cond's last error.
func For(t T, what string, cond func() error, opts ...Option) {
	t.Helper()
	c := config{timeout: DefaultTimeout, interval: maxInterval}
	for _, o := range opts {
		o(&c)
	}
	limit := timeout(c.timeout, os.Getenv(ScaleVar), deadline(t), time.Now())
	start := time.Now()
	pause := time.Millisecond
	for checks := 1; ; checks++ {
		err := cond()
		if err == nil {
			return
		}
		if waited := time.Since(start); waited >= limit {
			t.Fatalf("timed out after %s (%d checks) waiting for %s: %v", waited.Round(time.Millisecond), checks, what, err)
			return // Fatalf does not return; a stand-in T's may
		}
		time.Sleep(pause)
		pause = min(2*pause, c.interval)
	}
}

// Until is For for a condition with no reason to give.
func Until(t T, what string, cond func() bool, opts ...Option) {
	t.Helper()
	For(t, what, func() error {
		if cond() {
			return nil
		}
		return errFalse
	}, opts...)
}

// deadline is the test binary's -timeout, when t knows it. Inside a
// testing/synctest bubble, where it means nothing (the bubble has a clock
// of its own), testing.T's Deadline panics: then there is none.
func deadline(t T) (at time.Time) {
	defer func() {
		if recover() != nil {
			at = time.Time{}
		}
	}()
	if d, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if at, ok := d.Deadline(); ok {
			return at
		}
	}
	return time.Time{}
}

// timeout scales base by scale (ignored unless a number of at least 1)
// and ends it before the binary's deadline (zero: none), leaving a tenth
// of the time left, at most 5s, to report the failure and clean up.
func timeout(base time.Duration, scale string, deadline, now time.Time) time.Duration {
	if f, err := strconv.ParseFloat(scale, 64); err == nil && f >= 1 {
		base = time.Duration(float64(base) * f)
	}
	if deadline.IsZero() {
		return base
	}
	left := deadline.Sub(now)
	return max(0, min(base, left-min(left/10, 5*time.Second)))
}
