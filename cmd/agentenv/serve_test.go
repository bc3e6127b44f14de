package main

// End-to-end tests of `agentenv serve`: the real binary as a subprocess,
// serving examples/gridsim with the process sandbox (real env processes
// over MCP, real plugin subprocesses), played by real WebSocket clients.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
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

	"github.com/gorilla/websocket"
)

const gridsimBundle = "../../examples/gridsim"

// idleSchedule is a valid GridSim schedule that idles all day (grade 0.2).
var idleSchedule = `<tool_call>\n{\"name\": \"submit_schedule\", \"arguments\": {\"schedule\": [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]}}\n</tool_call>`

// lockedBuffer collects a subprocess's output safely for reading mid-run.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// served is one `agentenv serve` process.
type served struct {
	cmd      *exec.Cmd
	addr     string
	stateDir string
	log      *lockedBuffer
	exited   chan struct{}
	waitErr  error
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startServe runs agentenv serve with its sandboxes' state in stateDir and
// waits until /health answers. Whatever happens, the test's cleanup kills
// the server and every env process it left.
func startServe(t *testing.T, bundleDir, addr, stateDir string, env []string, args ...string) *served {
	t.Helper()
	s := launchServe(t, bundleDir, addr, stateDir, env, args...)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		resp, err := http.Get("http://" + addr + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return s
			}
		}
		select {
		case <-s.exited:
			t.Fatalf("serve exited before serving: %v\n%s", s.waitErr, s.log)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve not healthy after 2 minutes:\n%s", s.log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func launchServe(t *testing.T, bundleDir, addr, stateDir string, env []string, args ...string) *served {
	t.Helper()
	full := []string{"serve", bundleDir, "--addr", addr, "--log-level", "debug"}
	if stateDir != "" { // the local sandbox's; another sandbox takes its own settings in args
		// Process mode: these tests watch env processes (Docker mode has its own tests).
		full = append(full, "--sandbox-config", "state_dir="+stateDir, "--sandbox-config", "mode=process")
	}
	full = append(full, args...)
	cmd := exec.Command(agentenv(t), full...)
	cmd.Env = append(os.Environ(), env...)
	s := &served{cmd: cmd, addr: addr, stateDir: stateDir, log: &lockedBuffer{}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = s.log, s.log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		s.waitErr = cmd.Wait()
		close(s.exited)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-s.exited
		killLeftovers(t, stateDir)
	})
	return s
}

// signalAndWait sends sig and waits for the exit, returning its code.
func (s *served) signalAndWait(t *testing.T, sig syscall.Signal, within time.Duration) int {
	t.Helper()
	if err := s.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.exited:
	case <-time.After(within):
		t.Fatalf("serve still running %s after %v:\n%s", within, sig, s.log)
	}
	return s.cmd.ProcessState.ExitCode()
}

// envProc is an env process as the local sandbox's state file records it.
type envProc struct {
	ID   string `json:"id"`
	PID  int    `json:"pid"`
	PGID int    `json:"pgid"`
}

func stateFiles(t *testing.T, dir string) []envProc {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	var out []envProc
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // removed meanwhile
		}
		var e envProc
		if json.Unmarshal(b, &e) == nil && e.PID > 0 {
			out = append(out, e)
		}
	}
	return out
}

// alive reports whether pid runs (a zombie nobody reaped yet is dead).
func alive(pid int) bool {
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

func killLeftovers(t *testing.T, dir string) {
	if dir == "" {
		return
	}
	for _, e := range stateFiles(t, dir) {
		if e.PGID > 0 && alive(e.PID) {
			t.Errorf("env process %d (sandbox %s) left running; killing it", e.PID, e.ID)
			syscall.Kill(-e.PGID, syscall.SIGKILL)
		}
	}
}

type e2eClient struct {
	t    *testing.T
	conn *websocket.Conn
}

func dialServe(t *testing.T, addr, token string) *e2eClient {
	t.Helper()
	h := http.Header{}
	if token != "" {
		h.Set("Authorization", "Bearer "+token)
	}
	conn, _, err := websocket.DefaultDialer.Dial("ws://"+addr+"/ws", h)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	return &e2eClient{t: t, conn: conn}
}

// call sends frame and returns the reply's type and data.
func (c *e2eClient) call(frame string) (string, map[string]any, error) {
	if err := c.conn.WriteMessage(websocket.TextMessage, []byte(frame)); err != nil {
		return "", nil, err
	}
	c.conn.SetReadDeadline(time.Now().Add(3 * time.Minute))
	_, b, err := c.conn.ReadMessage()
	if err != nil {
		return "", nil, err
	}
	var r struct {
		Type string         `json:"type"`
		Data map[string]any `json:"data"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return "", nil, fmt.Errorf("reply not JSON: %q", b)
	}
	return r.Type, r.Data, nil
}

func (c *e2eClient) observation(frame string) map[string]any {
	c.t.Helper()
	typ, data, err := c.call(frame)
	if err != nil || typ != "observation" {
		c.t.Fatalf("%.60s: %s %v %v", frame, typ, data, err)
	}
	return data
}

// playIdleDay plays one GridSim day: reset, submit the idle schedule, end
// the turn. It returns the final observation data.
func playIdleDay(c *e2eClient, index int) (map[string]any, error) {
	steps := []string{
		`{"type": "reset", "data": {"split": "eval", "index": ` + strconv.Itoa(index) + `}}`,
		`{"type": "step", "data": {"reply": "` + idleSchedule + `"}}`,
		`{"type": "step", "data": {"reply": "I am done.<|im_end|>"}}`,
	}
	var data map[string]any
	for _, s := range steps {
		typ, d, err := c.call(s)
		if err != nil {
			return nil, err
		}
		if typ != "observation" {
			return nil, fmt.Errorf("%.40s: got %s %v", s, typ, d)
		}
		data = d
	}
	return data, nil
}

func metricsText(t *testing.T, addr, token string) string {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+addr+"/metrics", nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func metric(text, series string) float64 {
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f
		}
	}
	return -1
}
