package hostenv

import (
	"context"
	"errors"
	"net"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"
)

func TestWaitReady(t *testing.T) {
	refused := errors.New("connection refused")
	for _, tc := range []struct {
		name      string
		readyAt   int   // the probe succeeds from this call on; 0 never
		exitAt    int   // the process exits on this probe call; 0 never
		exitErr   error // its exit
		timeout   time.Duration
		wantErr   string
		wantIs    error
		wantCalls int // at least this many probe calls
	}{
		{name: "ready at once", readyAt: 1, timeout: 5 * time.Second, wantCalls: 1},
		{name: "ready after polling", readyAt: 5, timeout: 5 * time.Second, wantCalls: 5},
		{name: "exits first", exitAt: 2, exitErr: errors.New("exit status 3"), timeout: 5 * time.Second,
			wantErr: "exited before listening on port 31000: exit status 3", wantCalls: 2},
		{name: "exits cleanly", exitAt: 1, timeout: 5 * time.Second,
			wantErr: "exited before listening on port 31000: exit status 0", wantCalls: 1},
		{name: "never ready", timeout: 50 * time.Millisecond,
			wantErr: "not listening on port 31000", wantIs: context.DeadlineExceeded, wantCalls: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), tc.timeout)
			defer cancel()
			done := make(chan struct{})
			calls := 0
			probe := func(context.Context) error {
				calls++
				if calls == tc.exitAt {
					close(done)
				}
				if tc.readyAt > 0 && calls >= tc.readyAt {
					return nil
				}
				return refused
			}
			err := WaitReady(ctx, 31000, done, func() error { return tc.exitErr }, probe)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatal(err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			case tc.wantIs != nil && !errors.Is(err, tc.wantIs):
				t.Fatalf("error %v does not wrap %v", err, tc.wantIs)
			case calls < tc.wantCalls:
				t.Fatalf("probed %d times, want at least %d", calls, tc.wantCalls)
			}
		})
	}
}

func TestDialProbe(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	if err := DialProbe(port)(context.Background()); err != nil {
		t.Fatalf("probe of a listening port: %v", err)
	}
	// On Linux the probe's own connect settles it, without the dialer.
	if done, err := connectOnce(port); runtime.GOOS == "linux" && (!done || err != nil) {
		t.Fatalf("connectOnce of a listening port = %v, %v; want settled, nil", done, err)
	}
	ln.Close()
	if err := DialProbe(port)(context.Background()); err == nil {
		t.Fatal("probe of a closed port succeeded")
	}
	if done, err := connectOnce(port); runtime.GOOS == "linux" && (!done || !errors.Is(err, syscall.ECONNREFUSED)) {
		t.Fatalf("connectOnce of a closed port = %v, %v; want settled, connection refused", done, err)
	}
}

// TestWaitReadyExpectingProbesLess: with the time to listen expected, an
// env listening at that time is found in a few probes, at most an eighth
// of it late; without, the doubling from 200 µs probes twice as often. An
// exit is seen at once either way. (testing/synctest: the clock is the
// bubble's, so the counts are exact and take no wall time.)
func TestWaitReadyExpectingProbesLess(t *testing.T) {
	const listensAt = 40 * time.Millisecond
	for _, tc := range []struct {
		name      string
		expect    time.Duration
		exitAt    time.Duration // the process exits then; 0 never
		maxCalls  int
		minCalls  int
		latest    time.Duration // ready seen by then
		wantError string
	}{
		{name: "no expectation", expect: 0, minCalls: 10, maxCalls: 20, latest: listensAt + 5*time.Millisecond},
		{name: "expected", expect: listensAt, minCalls: 1, maxCalls: 5, latest: listensAt + listensAt/8},
		{name: "expected late", expect: 4 * listensAt, minCalls: 1, maxCalls: 1, latest: 4 * listensAt * 3 / 5},
		{name: "expected early", expect: listensAt / 4, minCalls: 5, maxCalls: 20, latest: listensAt + 5*time.Millisecond},
		{name: "exits before the first probe", expect: listensAt, exitAt: 2 * time.Millisecond, maxCalls: 0,
			latest: 2 * time.Millisecond, wantError: "exited before listening on port 31000: exit status 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				began := time.Now()
				done := make(chan struct{})
				if tc.exitAt > 0 {
					time.AfterFunc(tc.exitAt, func() { close(done) })
				}
				calls := 0
				probe := func(context.Context) error {
					calls++
					if time.Since(began) >= listensAt {
						return nil
					}
					return syscall.ECONNREFUSED
				}
				err := WaitReadyExpecting(t.Context(), 31000, tc.expect, done, func() error { return errors.New("exit status 3") }, probe)
				took := time.Since(began)
				switch {
				case tc.wantError == "" && err != nil:
					t.Fatal(err)
				case tc.wantError != "" && (err == nil || err.Error() != tc.wantError):
					t.Fatalf("error %v, want %q", err, tc.wantError)
				case calls < tc.minCalls || calls > tc.maxCalls:
					t.Fatalf("probed %d times, want %d to %d", calls, tc.minCalls, tc.maxCalls)
				case took > tc.latest:
					t.Fatalf("returned after %v, want by %v", took, tc.latest)
				}
			})
		})
	}
}

func TestListenTimes(t *testing.T) {
	var l ListenTimes
	if got := l.Expect("env"); got != 0 {
		t.Fatalf("Expect before any start = %v, want 0", got)
	}
	l.Observe("env", 40*time.Millisecond)
	if got := l.Expect("env"); got != 40*time.Millisecond {
		t.Fatalf("Expect after one start = %v, want 40ms", got)
	}
	l.Observe("env", 120*time.Millisecond) // one slow start moves it an eighth of the way
	if got := l.Expect("env"); got != 50*time.Millisecond {
		t.Fatalf("Expect after a slow start = %v, want 50ms", got)
	}
	if got := l.Expect("other"); got != 0 {
		t.Fatalf("another command's Expect = %v, want 0", got)
	}
	for i := range maxListenKeys {
		l.Observe(strconv.Itoa(i), time.Millisecond)
	}
	if n := len(l.avg); n > maxListenKeys {
		t.Fatalf("keeps %d commands, want at most %d", n, maxListenKeys)
	}
}
