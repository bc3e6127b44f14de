package hostenv

import (
	"context"
	"errors"
	"net"
	"runtime"
	"strings"
	"syscall"
	"testing"
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
