package main

// End-to-end tests of `agentenv serve`: the real binary as a subprocess,
// serving examples/gridsim with the process sandbox (real env processes
// over MCP, real plugin subprocesses), played by real WebSocket clients.

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/agentenv/agentenv/internal/servetest"
)

const gridsimBundle = "../../examples/gridsim"

// idleSchedule is a valid GridSim schedule that idles all day (grade 0.2).
var idleSchedule = `<tool_call>\n{\"name\": \"submit_schedule\", \"arguments\": {\"schedule\": [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]}}\n</tool_call>`

// lockedBuffer collects a subprocess's output safely for reading mid-run.
type lockedBuffer = servetest.Buffer

// served is one `agentenv serve` process.
type served struct {
	*servetest.Server
	cmd      *exec.Cmd
	addr     string
	stateDir string
	log      *lockedBuffer
	exited   <-chan struct{}
}

func freeAddr(t *testing.T) string { return servetest.FreeAddr(t) }

// startServe runs agentenv serve with its sandboxes' state in stateDir and
// waits until /health answers. Whatever happens, the test's cleanup kills
// the server and every env process it left.
func startServe(t *testing.T, bundleDir, addr, stateDir string, env []string, args ...string) *served {
	t.Helper()
	s := launchServe(t, bundleDir, addr, stateDir, env, args...)
	s.WaitReady(t, 2*time.Minute)
	return s
}

func launchServe(t *testing.T, bundleDir, addr, stateDir string, env []string, args ...string) *served {
	t.Helper()
	// A state dir: the local sandbox in process mode (these tests watch env
	// processes; Docker mode has its own tests); another sandbox takes its
	// own settings in args.
	s := servetest.Launch(t, servetest.Options{Bin: agentenv(t), Bundle: bundleDir, Addr: addr, StateDir: stateDir, Env: env,
		Args: append([]string{"--log-level", "debug"}, args...)})
	return &served{Server: s, cmd: s.Cmd, addr: s.Addr, stateDir: s.StateDir, log: s.Log, exited: s.Exited()}
}

// signalAndWait sends sig and waits for the exit, returning its code.
func (s *served) signalAndWait(t *testing.T, sig syscall.Signal, within time.Duration) int {
	t.Helper()
	return s.Stop(t, sig, within)
}

// envProc is an env process as the local sandbox's state file records it.
type envProc = servetest.EnvProc

func stateFiles(t *testing.T, dir string) []envProc { return servetest.StateFiles(dir) }

// alive reports whether pid runs (a zombie nobody reaped yet is dead).
func alive(pid int) bool { return servetest.Alive(pid) }

type e2eClient struct {
	t    *testing.T
	conn *websocket.Conn
	// wait bounds the wait for each reply (3 minutes when zero).
	wait time.Duration
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
	wait := c.wait
	if wait == 0 {
		wait = 3 * time.Minute
	}
	c.conn.SetReadDeadline(time.Now().Add(wait))
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
