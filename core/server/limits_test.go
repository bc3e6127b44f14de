package server

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentenv/agentenv/sdk/sdktest/wait"

	"github.com/hashicorp/go-hclog"
)

// rawGet sends one keep-alive GET on conn and reads the response.
func rawGet(conn net.Conn, br *bufio.Reader, path string) (*http.Response, error) {
	if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: test\r\n\r\n", path); err != nil {
		return nil, err
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return nil, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp, nil
}

// waitClosed reads conn until the server closes it, or until deadline.
func waitClosed(conn net.Conn, deadline time.Time) error {
	conn.SetReadDeadline(deadline)
	_, err := io.Copy(io.Discard, conn)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return fmt.Errorf("still open at the deadline")
	}
	return nil
}

// 200 kept-alive connections left idle after a request are all closed by
// the server once the idle timeout passes, and not before.
func TestIdleKeepAliveConnectionsAreClosed(t *testing.T) {
	const idle = 400 * time.Millisecond
	ts := startServer(t, Options{HTTP: HTTPLimits{IdleTimeout: idle}})
	conns := make([]net.Conn, 200)
	for i := range conns {
		c, err := net.Dial("tcp", ts.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		resp, err := rawGet(c, bufio.NewReader(c), "/health")
		if err != nil || resp.StatusCode != 200 || resp.Close {
			t.Fatalf("connection %d: GET /health: %v %v", i, resp, err)
		}
		conns[i] = c
	}
	start := time.Now()
	// The last connection went idle just now: none may close well before
	// the timeout, all must close soon after it.
	if err := waitClosed(conns[len(conns)-1], start.Add(idle/2)); err == nil {
		t.Fatalf("a connection was closed %s after its request, before the idle timeout of %s", time.Since(start), idle)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	open := 0
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if waitClosed(c, start.Add(idle+2*time.Second)) != nil {
				mu.Lock()
				open++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if open > 0 {
		t.Fatalf("%d of 200 idle connections still open %s after going idle (idle timeout %s)", open, time.Since(start), idle)
	}
}

// A request whose body never comes, or whose headers never end, does not
// hold its connection past the read timeout.
func TestSlowRequestsAreCutOff(t *testing.T) {
	const read = 400 * time.Millisecond
	ts := startServer(t, Options{HTTP: HTTPLimits{ReadTimeout: read}})
	for name, req := range map[string]string{
		"body never comes":   "POST /mcp HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{",
		"headers never end":  "GET /health HTTP/1.1\r\nHost: test\r\n",
		"nothing after dial": "",
	} {
		t.Run(name, func(t *testing.T) {
			c, err := net.Dial("tcp", ts.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			start := time.Now()
			io.WriteString(c, req)
			if err := waitClosed(c, start.Add(read+2*time.Second)); err != nil {
				t.Fatalf("%s after %s (read timeout %s)", err, time.Since(start), read)
			}
		})
	}
}

// Past MaxConnections a new connection is answered 503 and closed at
// once; when one closes, the next is served again.
func TestConnectionCap(t *testing.T) {
	ts := startServer(t, Options{HTTP: HTTPLimits{MaxConnections: 5}})
	var held []net.Conn
	for range 5 {
		c, err := net.Dial("tcp", ts.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if resp, err := rawGet(c, bufio.NewReader(c), "/health"); err != nil || resp.StatusCode != 200 {
			t.Fatalf("connection under the cap: %v %v", resp, err)
		}
		held = append(held, c)
	}
	over, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer over.Close()
	over.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(over), nil)
	if err != nil {
		t.Fatalf("the connection past the cap got no answer: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 503 || !strings.Contains(string(body), "connections") {
		t.Fatalf("past the cap: %d %s", resp.StatusCode, body)
	}
	held[0].Close()
	wait.For(t, "a connection served after one of the 5 closed", func() error {
		c, err := net.Dial("tcp", ts.addr)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := rawGet(c, bufio.NewReader(c), "/health")
		c.Close()
		if err != nil {
			return err
		}
		if resp.StatusCode != 200 {
			return fmt.Errorf("/health: %d", resp.StatusCode)
		}
		return nil
	})
}

// A server whose caps need more open files than ulimit -n allows says so
// at start, naming the number it needs.
func TestOpenFileLimitWarning(t *testing.T) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Skip(err)
	}
	var logged bytes.Buffer
	var mu sync.Mutex
	log := hclog.New(&hclog.LoggerOptions{Output: &lockedWriter{w: &logged, mu: &mu}, Level: hclog.Warn})
	conns := int(rl.Cur) // with the envs and the room, past the limit
	startServer(t, Options{Logger: log, MaxConcurrentEnvs: 100, HTTP: HTTPLimits{MaxConnections: conns}})
	need := OpenFilesNeeded(conns, 100)
	text := func() string { mu.Lock(); defer mu.Unlock(); return logged.String() }
	// Serve logs it as it starts, in its goroutine.
	wait.Until(t, "the open-file warning", func() bool {
		return strings.Contains(text(), "ulimit -n") && strings.Contains(text(), fmt.Sprint(need))
	})
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
