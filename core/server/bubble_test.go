package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/gorilla/websocket"
)

// startPipeServer is startServer over in-memory connections (net.Pipe):
// no socket, so a test inside a testing/synctest bubble runs the server
// there too and its timers run on the bubble's clock.
func startPipeServer(t *testing.T, opts Options) *testServer {
	t.Helper()
	s := newTestServer(t, opts)
	ln := newPipeListener()
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	t.Cleanup(func() {
		if err := s.Shutdown(context.Background()); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return &testServer{Server: s, addr: "pipe", dialer: &websocket.Dialer{NetDialContext: ln.dial}}
}

// metric reads one unlabelled sample from /metrics over the pipe.
func (ts *testServer) metric(t *testing.T, series string) (float64, bool) {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{DialContext: ts.dialer.NetDialContext}}
	defer client.CloseIdleConnections()
	resp, err := client.Get("http://pipe/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			var f float64
			if err := json.Unmarshal([]byte(strings.TrimSpace(v)), &f); err != nil {
				t.Fatalf("metric %s: %v", line, err)
			}
			return f, true
		}
	}
	return 0, false
}

// pipeListener hands the server one end of a net.Pipe per dial.
type pipeListener struct {
	conns     chan net.Conn
	closed    chan struct{}
	closeOnce sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), closed: make(chan struct{})}
}

func (l *pipeListener) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.closed:
		return nil, errors.New("pipe listener closed")
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }
