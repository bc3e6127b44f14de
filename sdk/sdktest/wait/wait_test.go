package wait

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// stand is a T that records a failure and ends its goroutine, as
// testing.T's Fatalf does.
type stand struct {
	failed string
}

func (*stand) Helper() {}

func (s *stand) Fatalf(format string, args ...any) {
	s.failed = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// run calls f with a stand in a goroutine of its own (Fatalf ends it)
// and returns the failure, "" if none.
func run(f func(T)) string {
	s := &stand{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(s)
	}()
	<-done
	return s.failed
}

func TestForReturnsOnceTheConditionHolds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start, calls := time.Now(), 0
		failed := run(func(s T) {
			For(s, "three calls", func() error {
				if calls++; calls < 3 {
					return fmt.Errorf("call %d", calls)
				}
				return nil
			})
		})
		if failed != "" || calls != 3 {
			t.Fatalf("failed %q after %d calls; want no failure after 3", failed, calls)
		}
		// Two pauses, 1ms then 2ms: a condition about to hold costs little.
		if d := time.Since(start); d != 3*time.Millisecond {
			t.Errorf("took %s (bubble time), want 3ms", d)
		}
	})
}

func TestForFailsWithTheLastError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t.Setenv(ScaleVar, "")
		start, calls := time.Now(), 0
		failed := run(func(s T) {
			For(s, "the widget", func() error {
				calls++
				return fmt.Errorf("widget %d not ready", calls)
			}, Timeout(time.Second))
			panic("For returned after a failure")
		})
		// Bubble time is exact: checks at 0, 1, 3, 7, 15, 31ms, then every
		// 20ms until the first at or past 1s, the 55th.
		want := "timed out after 1.011s (55 checks) waiting for the widget: widget 55 not ready"
		if failed != want {
			t.Errorf("failure %q, want %q", failed, want)
		}
		if d := time.Since(start); d != 1011*time.Millisecond || calls != 55 {
			t.Errorf("gave up after %s (bubble time) and %d calls, want 1.011s and 55", d, calls)
		}
	})
}

func TestUntil(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t.Setenv(ScaleVar, "")
		if failed := run(func(s T) { Until(s, "never", func() bool { return false }, Timeout(time.Second)) }); !strings.HasSuffix(failed, "waiting for never: the condition was still false") {
			t.Errorf("failure %q", failed)
		}
		n := 0
		if failed := run(func(s T) { Until(s, "soon", func() bool { n++; return n == 2 }) }); failed != "" {
			t.Errorf("failure %q", failed)
		}
	})
}

func TestEverySetsTheLongestPause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t.Setenv(ScaleVar, "")
		calls := 0
		run(func(s T) {
			For(s, "x", func() error { calls++; return errors.New("no") }, Timeout(time.Second), Every(100*time.Millisecond))
		})
		// 1+2+4+...+64 = 127ms, then every 100ms: 7 + 9 checks, +1 at 1s.
		if calls < 15 || calls > 18 {
			t.Errorf("%d checks in 1s, want about 17", calls)
		}
	})
}

func TestScaleStretchesTheTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t.Setenv(ScaleVar, "3")
		start := time.Now()
		run(func(s T) { Until(s, "x", func() bool { return false }, Timeout(time.Second)) })
		if d := time.Since(start); d < 3*time.Second || d > 3*time.Second+maxInterval {
			t.Errorf("gave up after %s (bubble time), want 3s", d)
		}
	})
}

func TestTimeout(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name     string
		scale    string
		deadline time.Time
		want     time.Duration
	}{
		{name: "default", want: time.Minute},
		{name: "scaled", scale: "2.5", want: 150 * time.Second},
		{name: "scale under 1 ignored", scale: "0.1", want: time.Minute},
		{name: "scale not a number ignored", scale: "lots", want: time.Minute},
		{name: "far deadline", deadline: now.Add(10 * time.Minute), want: time.Minute},
		{name: "near deadline keeps 5s", deadline: now.Add(62 * time.Second), want: 57 * time.Second},
		{name: "close deadline keeps a tenth", deadline: now.Add(10 * time.Second), want: 9 * time.Second},
		{name: "deadline passed", deadline: now.Add(-time.Second), want: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := timeout(time.Minute, tc.scale, tc.deadline, now); got != tc.want {
				t.Errorf("timeout = %s, want %s", got, tc.want)
			}
		})
	}
}

// A real test's deadline reaches For: the guard ends before -timeout.
func TestDeadlineOfARealTest(t *testing.T) {
	at, ok := t.Deadline()
	if got := deadline(t); got != at || got.IsZero() != !ok {
		t.Errorf("deadline = %v, want %v (%v)", got, at, ok)
	}
	if got := deadline(&stand{}); !got.IsZero() {
		t.Errorf("deadline of a T without one = %v", got)
	}
}

// In a bubble a real T has no deadline to give (its Deadline panics
// there): For goes by its own guard, on the bubble's clock.
func TestForInsideABubble(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		if got := deadline(t); !got.IsZero() {
			t.Errorf("deadline in a bubble = %v, want none", got)
		}
		start, n := time.Now(), 0
		Until(t, "the third check", func() bool { n++; return n == 3 })
		if d := time.Since(start); d != 3*time.Millisecond {
			t.Errorf("took %s of bubble time, want 3ms", d)
		}
	})
}
