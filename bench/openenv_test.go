package bench

// BenchmarkOpenEnvStep: agentenv serve's step round trip against OpenEnv's
// own Python server (openenv-core's create_app under uvicorn), in one run.

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/agentenv/agentenv/client"
)

// userCacheDir is the user's cache folder as setup.sh sees it, read when
// the package initialises: TestMain (servetest.Main) points XDG_CACHE_HOME
// at a temporary folder before the benchmarks run.
var userCacheDir, _ = os.UserCacheDir()

// openenvCache is where bench/openenv/setup.sh puts OpenEnv's server, its
// Python packages and the env file the benchmark reads.
func openenvCache() string {
	if d := os.Getenv("AGENTENV_OPENENV_CACHE"); d != "" {
		return d
	}
	return filepath.Join(userCacheDir, "agentenv-bench", "openenv")
}

// openenvSetup reads the env file setup.sh wrote (KEY=value lines), or
// skips the benchmark when there is none.
func openenvSetup(b *testing.B) map[string]string {
	b.Helper()
	path := filepath.Join(openenvCache(), "env")
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		b.Skipf("OpenEnv's server is not set up (no %s): run bench/openenv/setup.sh first", path)
	}
	if err != nil {
		b.Fatalf("OpenEnv set-up: %v", err)
	}
	defer f.Close()
	env := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			env[k] = v
		}
	}
	if err := sc.Err(); err != nil {
		b.Fatalf("read %s: %v", path, err)
	}
	for _, k := range []string{"PYTHON", "PYTHONPATH"} {
		if env[k] == "" {
			b.Fatalf("%s has no %s: run bench/openenv/setup.sh again", path, k)
		}
	}
	return env
}

// serveOpenEnv runs bench/openenv/echo_env.py: OpenEnv's own server
// (create_app, uvicorn, websockets) with an env doing a GridSim step's work;
// extra are more KEY=value variables for it.
func serveOpenEnv(b *testing.B, env map[string]string, extra ...string) *process {
	b.Helper()
	addr := freePort(b)
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(env["PYTHON"], "openenv/echo_env.py", "--port", port)
	cmd.Env = pythonEnv(env, extra)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	return startCmd(b, addr, cmd)
}

// pythonEnv is the environment OpenEnv's servers run in: this process's,
// setup.sh's PYTHONPATH, and extra. Python's DeprecationWarnings are off:
// Debian's uvicorn imports websockets' legacy server, which warns at every
// start, and the benchmark's output is no place to act on it.
func pythonEnv(env map[string]string, extra []string) []string {
	return append(append(os.Environ(), "PYTHONPATH="+env["PYTHONPATH"], "PYTHONWARNINGS=ignore::DeprecationWarning"), extra...)
}

// wsRoundTrip opens a raw WebSocket on url and returns one round trip of
// frame (the echo floors), and a function closing the connection.
func wsRoundTrip(b *testing.B, url string, frame []byte) func() {
	b.Helper()
	c, _, err := websocket.DefaultDialer.Dial(url, nil)
	if err != nil {
		b.Fatalf("dial %s: %v", url, err)
	}
	b.Cleanup(func() { c.Close() })
	return func() {
		if err := c.WriteMessage(websocket.TextMessage, frame); err != nil {
			b.Fatal(err)
		}
		if _, m, err := c.ReadMessage(); err != nil || len(m) != len(frame) {
			b.Fatalf("echo from %s: %d bytes, %v", url, len(m), err)
		}
	}
}

// stepFrameBytes plays a reset and the step frame step on a raw
// WebSocket to the server at addr and returns the size of the step's
// answer frame, and the answer itself.
func stepFrameBytes(b *testing.B, addr string, step []byte) (int, string) {
	b.Helper()
	c, _, err := websocket.DefaultDialer.Dial("ws://"+addr+"/ws", nil)
	if err != nil {
		b.Fatalf("dial %s: %v", addr, err)
	}
	defer c.Close()
	var answer []byte
	for _, frame := range [][]byte{[]byte(`{"type":"reset","data":{"task_id":"day/eval-001"}}`), step} {
		if err := c.WriteMessage(websocket.TextMessage, frame); err != nil {
			b.Fatal(err)
		}
		if _, answer, err = c.ReadMessage(); err != nil {
			b.Fatal(err)
		}
	}
	return len(answer), string(answer)
}

// BenchmarkOpenEnvStep is one GridSim step through agentenv serve (as
// BenchmarkServerStep times it: a step frame whose reply holds a hermes
// submit_schedule call, parsed, checked, run on the GridSim env process
// over MCP, answered as a tool message) against one step through OpenEnv's
// own server (bench/openenv/echo_env.py: openenv-core's create_app under
// uvicorn, whose env reads the same reply's hermes call, checks and prices
// the schedule and answers with one tool message worded as GridSim's), both
// driven by agentenv's Go client with the same frames, in blocks taken in
// turn so the machine's load falls on both alike. Two WebSocket echo
// round trips of the step frame are measured in the same blocks to be
// read against: gorilla/websocket's (bench/internal/wsecho) and a bare
// echo route on OpenEnv's Python stack (FastAPI, Starlette, uvicorn,
// websockets) in the same server process; and, for where agentenv's step
// goes, BenchmarkServerStep's floor (the same submit_schedule call made
// directly on a GridSim env process over MCP: the hop to the env that
// OpenEnv's in-process env does not make). A second pair is timed in the
// same blocks: one echo step on an agentenv bundle over core/testenv's echo
// tool against one echo_message call_tool step on OpenEnv's own
// envs/echo_env (an MCPEnvironment: FastMCP in OpenEnv's process), with
// its ratio echo-x-openenv. b.N is the steps per server.
//
// Needs bench/openenv/setup.sh (OpenEnv's source and Python server stack,
// in a cache outside the repository); skipped without it.
func BenchmarkOpenEnvStep(b *testing.B) {
	env := openenvSetup(b)
	oe := serveOpenEnv(b, env)
	srv := serveGridsim(b)
	_, wsecho := binaries(b)
	echoAddr := freePort(b)
	start(b, echoAddr, "/health", wsecho, "--addr", echoAddr)

	agentenvSession, opening := dayEpisode(b, srv.addr)
	openenvSession, openenvOpening := dayEpisode(b, oe.addr)
	if len(opening.Observation.Messages) == 0 || len(openenvOpening.Observation.Messages) == 0 {
		b.Fatalf("an opening observation without messages: agentenv %+v, OpenEnv %+v", opening, openenvOpening)
	}
	// The echo pair: one echo step on an agentenv bundle over
	// core/testenv (a hermes call of its echo tool, run over MCP) and one
	// call_tool step of echo_message on OpenEnv's own envs/echo_env
	// (FastMCP in OpenEnv's process). Set up before the raw echo
	// connections below, which answer no keepalive ping until they are used.
	echoSrv := serveEchoBundle(b, buildTestenv(b), 0)
	oeEcho := serveOpenEnvEcho(b, env)
	echoSession := dial(b, echoSrv.addr)
	if _, err := echoSession.Reset(context.Background(), client.ResetRequest{TaskID: "echo"}); err != nil {
		b.Fatalf("reset the echo bundle: %v", err)
	}
	agentenvEcho := func() {
		res, err := echoSession.Step(context.Background(), echoReply)
		if err != nil {
			b.Fatal(err)
		}
		if m := res.Observation.Messages; len(m) != 1 || m[0].Content != echoText {
			b.Fatalf("agentenv's echo step answered %+v", m)
		}
	}
	oeEchoConn, err := dialOpenEnvEcho(context.Background(), oeEcho.addr)
	if err != nil {
		b.Fatalf("dial OpenEnv's echo_env: %v", err)
	}
	b.Cleanup(func() { oeEchoConn.Close() })
	if _, err := oeEchoConn.roundTrip([]byte(`{"type":"reset","data":{}}`)); err != nil {
		b.Fatalf("reset OpenEnv's echo_env: %v", err)
	}
	openenvEcho := func() {
		data, err := oeEchoConn.roundTrip(openenvEchoCall)
		if err != nil {
			b.Fatal(err)
		}
		obs, _ := data["observation"].(map[string]any)
		if result, _ := obs["result"].(map[string]any); result["data"] != echoText {
			b.Fatalf("OpenEnv's echo_env answered %v", data)
		}
	}

	agentenvStep, openenvStep := idleStep(b, agentenvSession), idleStep(b, openenvSession)
	stepFrame := fmt.Appendf(nil, `{"type":"step","data":{"reply":%q}}`, idleReply)
	goEcho := wsRoundTrip(b, "ws://"+echoAddr+"/ws", stepFrame)
	pyEcho := wsRoundTrip(b, "ws://"+oe.addr+"/bench/echo", stepFrame)

	// What the two servers answer a step with, once, on a connection of
	// its own: the same shape (one tool message) and about the same size.
	agentenvBytes, agentenvAnswer := stepFrameBytes(b, srv.addr, stepFrame)
	openenvBytes, openenvAnswer := stepFrameBytes(b, oe.addr, stepFrame)
	for _, a := range []string{agentenvAnswer, openenvAnswer} {
		if !strings.Contains(a, `"role":"tool"`) || !strings.Contains(a, "Schedule accepted") {
			b.Fatalf("a step answer is not an accepted schedule's tool message: %s", a)
		}
	}
	b.Logf("agentenv's step answer (%d bytes): %s", agentenvBytes, agentenvAnswer)
	b.Logf("OpenEnv's step answer (%d bytes): %s", openenvBytes, openenvAnswer)
	b.Logf("OpenEnv %s on %s", env["OPENENV_COMMIT"], env["VERSIONS"])

	// Where agentenv's step goes: the same submit_schedule call made
	// directly on a GridSim env process over MCP (BenchmarkServerStep's
	// floor), the hop to the env that OpenEnv's in-process env does not make.
	directCall := directSubmit(b)

	const block = 100
	type series struct {
		name  string
		fn    func()
		pid   int // the server process whose CPU a call costs; 0: not counted
		times []time.Duration
		cpu   float64
	}
	all := []*series{
		{name: "agentenv", fn: agentenvStep, pid: srv.cmd.Process.Pid},
		{name: "openenv", fn: openenvStep, pid: oe.cmd.Process.Pid},
		{name: "echo", fn: goEcho},
		{name: "py-echo", fn: pyEcho},
		{name: "direct-mcp", fn: directCall},
		{name: "echo-agentenv", fn: agentenvEcho, pid: echoSrv.cmd.Process.Pid},
		{name: "echo-openenv", fn: openenvEcho, pid: oeEcho.cmd.Process.Pid},
	}
	for range 2 { // warm every path
		for _, s := range all {
			for range block {
				s.fn()
			}
		}
	}
	b.ResetTimer()
	for done := 0; done < b.N; done += block {
		n := min(block, b.N-done)
		for _, s := range all {
			var cpu0 float64
			if s.pid != 0 {
				cpu0 = cpuSeconds(b, s.pid)
			}
			for range n {
				t := time.Now()
				s.fn()
				s.times = append(s.times, time.Since(t))
			}
			if s.pid != 0 {
				s.cpu += cpuSeconds(b, s.pid) - cpu0
			}
		}
	}
	b.StopTimer()

	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 }
	p50 := map[string]time.Duration{}
	for _, s := range all {
		m, p99 := percentiles(s.times)
		p50[s.name] = m
		b.ReportMetric(ms(m), s.name+"-p50-ms")
		if s.pid != 0 {
			b.ReportMetric(ms(p99), s.name+"-p99-ms")
			b.ReportMetric(s.cpu*1e6/float64(len(s.times)), s.name+"-server-cpu-µs/step")
		}
	}
	b.ReportMetric(float64(agentenvBytes), "agentenv-answer-B")
	b.ReportMetric(float64(openenvBytes), "openenv-answer-B")
	b.ReportMetric(float64(p50["agentenv"])/float64(p50["echo"]), "agentenv-x-echo")
	b.ReportMetric(float64(p50["openenv"])/float64(p50["echo"]), "openenv-x-echo")
	b.ReportMetric(float64(p50["openenv"])/float64(p50["py-echo"]), "openenv-x-py-echo")
	b.ReportMetric(float64(p50["agentenv"])/float64(p50["openenv"]), "x-openenv")
	b.ReportMetric(float64(p50["echo-agentenv"])/float64(p50["echo-openenv"]), "echo-x-openenv")
}
