package envclient_test

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentenv/agentenv/core/envclient"
)

// countingProxy forwards TCP connections to target and counts them.
func countingProxy(t *testing.T, target string) (addr string, conns *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	conns = &atomic.Int64{}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				u, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer u.Close()
				go func() { io.Copy(u, c); u.Close() }()
				io.Copy(c, u)
			}()
		}
	}()
	return ln.Addr().String(), conns
}

// Calls made one after another, each with its own deadline, share one
// connection to the env: a call's context ends as soon as its answer is
// read, before the rest of the env's stream is, and that must not close the
// connection (it did for a third of the calls, each then dialing anew).
func TestCallsKeepTheirConnection(t *testing.T) {
	for _, tc := range []struct{ name, env string }{{"sse", ""}, {"json", "TESTENV_JSON_RESPONSE=1"}} {
		t.Run(tc.name, func(t *testing.T) {
			var env []string
			if tc.env != "" {
				env = append(env, tc.env)
			}
			addr, conns := countingProxy(t, strings.TrimPrefix(startEnv(t, env...), "http://"))
			c := connect(t, "http://"+addr, 30*time.Second)
			before := conns.Load()
			const calls = 200
			for range calls {
				res, err := c.CallTool(context.Background(), "echo", []byte(`{"text":"hi"}`), 10*time.Second)
				if err != nil || res.Text != "hi" {
					t.Fatalf("call: %+v, %v", res, err)
				}
			}
			if n := conns.Load() - before; n > 2 {
				t.Fatalf("%d calls opened %d new connections; want them to reuse one", calls, n)
			}
		})
	}
}

// A call whose env hangs still times out on time, and the next call works.
func TestTimeoutStillEndsAHungCall(t *testing.T) {
	c := connect(t, startEnv(t), 30*time.Second)
	start := time.Now()
	_, err := c.CallTool(context.Background(), "sleep", []byte(`{"seconds": 30}`), 300*time.Millisecond)
	if !errors.Is(err, envclient.ErrTimeout) {
		t.Fatalf("error %v, want ErrTimeout", err)
	}
	took := time.Since(start)
	t.Logf("the timed-out call returned after %v", took)
	if took > 10*time.Second {
		t.Fatalf("the timed-out call took %v", took)
	}
	if res, err := c.CallTool(context.Background(), "echo", []byte(`{"text":"after"}`), 10*time.Second); err != nil || res.Text != "after" {
		t.Fatalf("call after the timeout: %+v, %v", res, err)
	}
}
