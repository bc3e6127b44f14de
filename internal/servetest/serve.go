package servetest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentenv/agentenv/client"
)

// Buffer collects a subprocess's output, safe to read while it runs.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *Buffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *Buffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// FreeAddr is a loopback address nothing listens on now.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// Options say how to run `agentenv serve`.
type Options struct {
	Bin    string // the agentenv binary ("": Binary)
	Bundle string // the bundle folder
	Addr   string // where to listen ("": FreeAddr)
	// StateDir, when set, serves with the local sandbox in process mode
	// with its state there, so the cleanup can find env processes left.
	StateDir string
	Env      []string // added to this process's environment
	Args     []string // more flags
	// Drain is how long the cleanup waits after SIGTERM for the server to
	// drain before it kills it; 0 kills it at once.
	Drain time.Duration
	// Ready bounds the wait for /health (0: 3 minutes; the first start may
	// build an env).
	Ready time.Duration
}

// Server is one `agentenv serve` process.
type Server struct {
	Cmd      *exec.Cmd
	Addr     string // host:port
	URL      string // http://Addr
	StateDir string
	Log      *Buffer // its stdout and stderr

	exited  chan struct{}
	waitErr error
}

// Start runs agentenv serve as o says and waits until /health answers
// (failing the test if the server exits first). The test's cleanup stops
// it, then fails the test for every env process it left, and kills those.
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	s := Launch(t, o)
	s.WaitReady(t, o.Ready)
	return s
}

// Launch is Start without the wait.
func Launch(t testing.TB, o Options) *Server {
	t.Helper()
	if o.Bin == "" {
		o.Bin = Binary(t)
	}
	if o.Addr == "" {
		o.Addr = FreeAddr(t)
	}
	args := []string{"serve", o.Bundle, "--addr", o.Addr}
	if o.StateDir != "" {
		args = append(args, "--sandbox-config", "state_dir="+o.StateDir, "--sandbox-config", "mode=process")
	}
	cmd := exec.Command(o.Bin, append(args, o.Args...)...)
	cmd.Env = append(os.Environ(), o.Env...)
	s := &Server{Cmd: cmd, Addr: o.Addr, URL: "http://" + o.Addr, StateDir: o.StateDir, Log: &Buffer{}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = s.Log, s.Log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		s.waitErr = cmd.Wait()
		close(s.exited)
	}()
	t.Cleanup(func() {
		if o.Drain > 0 {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-s.exited:
			case <-time.After(o.Drain):
			}
		}
		_ = cmd.Process.Kill()
		<-s.exited
		for _, p := range EnvProcs(s.StateDir) {
			t.Errorf("env process %d (sandbox %s) left running; killing it", p.PID, p.ID)
			_ = syscall.Kill(-p.PGID, syscall.SIGKILL)
		}
	})
	return s
}

// WaitReady waits until /health answers 200, for at most within (0: 3
// minutes), failing the test if the server exits first.
func (s *Server) WaitReady(t testing.TB, within time.Duration) {
	t.Helper()
	if within <= 0 {
		within = 3 * time.Minute
	}
	deadline := time.Now().Add(within)
	for {
		resp, err := http.Get(s.URL + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-s.exited:
			t.Fatalf("serve exited before serving: %v\n%s", s.waitErr, s.Log)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve not healthy after %s:\n%s", within, s.Log)
		}
	}
}

// Exited is closed once the server's process has exited.
func (s *Server) Exited() <-chan struct{} { return s.exited }

// WaitErr is the process's exit error, once Exited is closed.
func (s *Server) WaitErr() error { return s.waitErr }

// Stop sends sig and waits (at most within) for the exit, returning the
// exit code.
func (s *Server) Stop(t testing.TB, sig syscall.Signal, within time.Duration) int {
	t.Helper()
	if err := s.Cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.exited:
	case <-time.After(within):
		t.Fatalf("serve still running %s after %v:\n%s", within, sig, s.Log)
	}
	return s.Cmd.ProcessState.ExitCode()
}

// Client is a client of the server.
func (s *Server) Client(t testing.TB, opts client.Options) *client.Client {
	t.Helper()
	c, err := client.New(s.URL, opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Dial opens a client session on the server, closed at the test's end.
func (s *Server) Dial(t testing.TB, opts client.Options) *client.Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sess, err := s.Client(t, opts).Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.Close() })
	return sess
}

// EnvProc is an env process as the local sandbox's state file records it.
type EnvProc struct {
	ID   string `json:"id"`
	PID  int    `json:"pid"`
	PGID int    `json:"pgid"`
}

// StateFiles lists the env processes the local sandbox's state files in
// dir record, running or not. A state file is written before its env
// starts and holds no pid: the env is the process whose environment
// carries its id (AGENTENV_SANDBOX_ID), the first started where the env's
// children carry it too; a file whose env is not found is left out.
func StateFiles(dir string) []EnvProc {
	if dir == "" {
		return nil
	}
	paths, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	var out []EnvProc
	var pidless []EnvProc
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // removed meanwhile
		}
		var e EnvProc
		switch {
		case json.Unmarshal(b, &e) != nil || e.ID == "":
		case e.PID > 0:
			out = append(out, e)
		default:
			pidless = append(pidless, e)
		}
	}
	if len(pidless) == 0 {
		return out
	}
	envs := envsByID()
	for _, e := range pidless {
		if pid, ok := envs[e.ID]; ok {
			e.PID, e.PGID = pid, pid
			out = append(out, e)
		}
	}
	return out
}

// envSandboxID is the variable every sandbox sets to its id
// (sdk/sandbox.EnvSandboxID; this package imports client only).
const envSandboxID = "AGENTENV_SANDBOX_ID"

// envsByID maps each AGENTENV_SANDBOX_ID found in a live process's
// environment to the lowest such pid (pids rise; the env before its
// children and its verifiers).
func envsByID() map[string]int {
	entries, _ := os.ReadDir("/proc")
	out := map[string]int{}
	for _, ent := range entries {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil || !Alive(pid) {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err != nil {
			continue
		}
		for _, kv := range strings.Split(string(b), "\x00") {
			id, ok := strings.CutPrefix(kv, envSandboxID+"=")
			if prev, seen := out[id]; ok && (!seen || pid < prev) {
				out[id] = pid
			}
		}
	}
	return out
}

// EnvProcs lists those of StateFiles(dir) still running.
func EnvProcs(dir string) []EnvProc {
	var live []EnvProc
	for _, e := range StateFiles(dir) {
		if e.PGID > 0 && Alive(e.PID) {
			live = append(live, e)
		}
	}
	return live
}

// Alive reports whether pid runs (a zombie nobody reaped yet is dead).
func Alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}
