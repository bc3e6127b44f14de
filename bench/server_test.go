package bench

// Benchmarks of `agentenv serve` (the real binary, serving examples/gridsim
// with the process sandbox), each against a floor measured in the same run.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
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
	"github.com/hashicorp/go-hclog"

	"github.com/agentenv/agentenv/client"
	"github.com/agentenv/agentenv/core/bundle"
	"github.com/agentenv/agentenv/core/envclient"
	"github.com/agentenv/agentenv/core/pluginhost"
	"github.com/agentenv/agentenv/internal/servetest"
	"github.com/agentenv/agentenv/sdk/toolformat"
)

const gridsimDir = "../examples/gridsim"

// idleReply is a model reply holding one hermes tool call that submits
// an idle schedule.
const idleReply = "<tool_call>\n" + `{"name": "submit_schedule", "arguments": {"schedule": [0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]}}` + "\n</tool_call>"

func TestMain(m *testing.M) { os.Exit(servetest.Main(m)) }

// binaries builds agentenv and the bare echo server once per run.
func binaries(b *testing.B) (agentenv, wsecho string) {
	b.Helper()
	return servetest.Binary(b), servetest.Build(b, "github.com/agentenv/agentenv/bench/internal/wsecho", "")
}

func freePort(b *testing.B) string { return servetest.FreeAddr(b) }

// process is a subprocess the benchmark stops (and waits for) at cleanup.
type process struct {
	cmd  *exec.Cmd
	addr string
}

func start(b *testing.B, addr string, health string, name string, args ...string) *process {
	b.Helper()
	return startLogged(b, os.Stderr, addr, name, args...)
}

// startLogged is start with the process's output going to out.
func startLogged(b *testing.B, out io.Writer, addr string, name string, args ...string) *process {
	b.Helper()
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = out, out
	return startCmd(b, addr, cmd)
}

// startCmd starts cmd, a server that will answer /health at addr, and
// waits until it does.
func startCmd(b *testing.B, addr string, cmd *exec.Cmd) *process {
	b.Helper()
	name := cmd.Path
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	// One Wait, watched by both the health wait (a server that exits at
	// start is reported at once, not after the whole wait) and the cleanup.
	done := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(done) }()
	b.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	go func() {
		select {
		case <-done:
			cancel()
		case <-ctx.Done():
		}
	}()
	c, err := client.New(addr, client.Options{})
	if err != nil {
		b.Fatal(err)
	}
	if err := c.Health(ctx); err != nil { // waits, while the server starts
		select {
		case <-done:
			b.Fatalf("%s exited before it served at %s: %v", name, addr, waitErr)
		default:
		}
		b.Fatalf("%s not healthy at %s: %v", name, addr, err)
	}
	return &process{cmd: cmd, addr: addr}
}

// serveGridsim runs agentenv serve on examples/gridsim.
func serveGridsim(b *testing.B, extra ...string) *process {
	agentenv, _ := binaries(b)
	addr := freePort(b)
	args := append([]string{"serve", gridsimDir, "--addr", addr, "--log-level", "warn",
		"--sandbox-config", "state_dir=" + b.TempDir(), "--sandbox-config", "mode=process"}, extra...)
	return start(b, addr, "/health", agentenv, args...)
}

// dial opens a client session on the server at addr.
func dial(b *testing.B, addr string) *client.Session {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := client.Dial(ctx, addr, client.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// dayEpisode opens a session on the server at addr and resets it to the
// task the step benchmarks play, day/eval-001; it returns the session and
// the opening observation.
func dayEpisode(b *testing.B, addr string) (*client.Session, client.Result) {
	b.Helper()
	s := dial(b, addr)
	opening, err := s.Reset(context.Background(), client.ResetRequest{TaskID: "day/eval-001"})
	if err != nil {
		b.Fatalf("reset on %s: %v", addr, err)
	}
	return s, opening
}

// idleStep returns one step of s with idleReply, the step the step
// benchmarks time.
func idleStep(b *testing.B, s *client.Session) func() {
	return func() {
		if _, err := s.Step(context.Background(), idleReply); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkServerStep is one GridSim step through the server — a WebSocket
// frame with a hermes tool call, parsed by the tool format (in the
// server's process, as serve runs it by default), run on the env over
// MCP, answered as a tool message — against the floor of the same MCP
// tool call made directly on a GridSim env process. A second server with
// --isolate-tool-formats (hermes as a plugin subprocess) is measured in
// the same run.
func BenchmarkServerStep(b *testing.B) {
	srv := serveGridsim(b)
	ctx := context.Background()
	s, opening := dayEpisode(b, srv.addr)
	step := idleStep(b, s)
	isolated := serveGridsim(b, "--isolate-tool-formats")
	si, _ := dayEpisode(b, isolated.addr)
	stepIsolated := idleStep(b, si)

	// The floor: the env binary the server built, run by hand, loaded with
	// the same day, called with the same tool and arguments.
	direct := directSubmit(b)
	for range 200 { // warm every path
		step()
		stepIsolated()
		direct()
	}
	_, directP50, _ := perCall(2000, direct)
	_, isolatedP50, _ := perCall(2000, stepIsolated)
	// Where the overhead goes: a protocol round trip through the same
	// server (state: no episode work), and the reply's parse by the hermes
	// plugin process with the same tools, as the engine makes it.
	_, stateP50, _ := perCall(2000, func() {
		if _, err := s.State(ctx); err != nil {
			b.Fatal(err)
		}
	})
	parse := hermesParse(b, opening.Observation.Tools)
	_, parseP50, _ := perCall(2000, parse)

	b.ResetTimer()
	cpu0 := cpuSeconds(b, srv.cmd.Process.Pid)
	_, p50, p99 := perCall(b.N, step)
	serverCPU := cpuSeconds(b, srv.cmd.Process.Pid) - cpu0
	b.StopTimer()
	// The server's own CPU a step (its plugins and the env aside): what of
	// the overhead is work rather than waiting on other processes.
	b.ReportMetric(serverCPU*1e6/float64(b.N), "server-cpu-µs/step")
	b.ReportMetric(float64(p50.Microseconds())/1e3, "p50-ms")
	b.ReportMetric(float64(p99.Microseconds())/1e3, "p99-ms")
	b.ReportMetric(float64(directP50.Microseconds())/1e3, "direct-p50-ms")
	b.ReportMetric(float64(p50-directP50)/1e6, "overhead-p50-ms")
	b.ReportMetric(float64(stateP50.Microseconds())/1e3, "ws-roundtrip-p50-ms")
	b.ReportMetric(float64(parseP50.Microseconds())/1e3, "plugin-parse-p50-ms")
	b.ReportMetric(float64(p50)/float64(directP50), "x-direct-mcp")
	b.ReportMetric(float64(isolatedP50-directP50)/1e6, "isolated-overhead-p50-ms")
	b.ReportMetric(float64(p50)/float64(isolatedP50), "x-isolated")
}

// hermesParse returns one parse of the benchmark's reply by the hermes
// plugin (a process of the agentenv binary, through the plugin host), with
// the tools of the opening observation.
func hermesParse(b *testing.B, offered []client.Tool) func() {
	b.Helper()
	agentenv, _ := binaries(b)
	// Builtins: what that binary serves (the default is what this test
	// binary links, and it links no tool format).
	h, err := pluginhost.New(pluginhost.Options{SelfExe: agentenv, Builtins: []string{"toolformat-hermes"},
		CachePath: "-", Logger: hclog.NewNullLogger()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { h.Close() })
	ctx := context.Background()
	p, err := h.ToolFormat(ctx, "hermes", nil)
	if err != nil {
		b.Fatal(err)
	}
	var tools []toolformat.Tool
	for _, t := range offered {
		tools = append(tools, toolformat.Tool{Name: t.Function.Name, Description: t.Function.Description, Parameters: t.Function.Parameters})
	}
	if len(tools) == 0 {
		b.Fatal("no tools in the opening observation")
	}
	set := toolformat.NewToolSet(tools) // once, as the engine makes it once a turn
	return func() {
		if got, err := toolformat.ParseWith(ctx, p, idleReply, set); err != nil || len(got.Calls) != 1 {
			b.Fatalf("parse: %+v %v", got, err)
		}
	}
}

// idleArgs are idleReply's submit_schedule arguments.
var idleArgs = json.RawMessage(`{"schedule":[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]}`)

// directSubmit returns one submit_schedule call with idleArgs made
// directly with the MCP client on a GridSim env process started by hand
// (directEnv) and loaded with day/eval-001: the step benchmarks' floor.
func directSubmit(b *testing.B) func() {
	b.Helper()
	env, load := directEnv(b)
	ctx := context.Background()
	if _, err := env.CallTool(ctx, "load_day", load, 10*time.Second); err != nil {
		b.Fatal(err)
	}
	return func() {
		if res, err := env.CallTool(ctx, "submit_schedule", idleArgs, 10*time.Second); err != nil || res.IsError {
			b.Fatalf("direct call: %v %v", err, res.Text)
		}
	}
}

// directEnv starts a GridSim env process by hand and connects to it; it
// returns the client and the load_day arguments of task day/eval-001.
func directEnv(b *testing.B) (*envclient.Client, json.RawMessage) {
	b.Helper()
	abs, _ := filepath.Abs(gridsimDir)
	bd, err := bundle.Load(abs, bundle.Options{})
	if err != nil {
		b.Fatal(err)
	}
	task, err := bd.Task("day/eval-001")
	if err != nil {
		b.Fatal(err)
	}
	load := task.Step("load")
	if load == nil {
		b.Fatal("task day/eval-001 has no load step")
	}
	envDef := bd.Envs["gridsim"]
	_, port, _ := net.SplitHostPort(freePort(b))
	cmd := exec.Command(filepath.Join(envDef.Dir, envDef.Command[0]), envDef.Command[1:]...)
	cmd.Dir = envDef.Dir
	cmd.Env = append(os.Environ(), "AGENTENV_PORT="+port)
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := envclient.Connect(ctx, "http://127.0.0.1:"+port, envclient.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return c, load.Arguments
}

// BenchmarkServerEpisodes is whole GridSim episodes (reset: deploy a fresh
// env process, load the day; a tool call; the final reply: grade, reward;
// teardown) played by 8 concurrent sessions, against the floor of the same
// work done directly: start the env process, connect, load, submit, grade,
// kill.
func BenchmarkServerEpisodes(b *testing.B) {
	const workers = 8
	srv := serveGridsim(b)
	env, load := directEnv(b) // also makes sure the env binary is built
	env.Close()
	abs, _ := filepath.Abs(gridsimDir)
	bd, err := bundle.Load(abs, bundle.Options{})
	if err != nil {
		b.Fatal(err)
	}
	envDef := bd.Envs["gridsim"]
	args := idleArgs

	// Ports handed to env processes are never handed out twice in the run:
	// the kernel may offer a port again between our probe closing it and
	// the env binding it.
	var portMu sync.Mutex
	used := map[string]bool{}
	envPort := func() string {
		portMu.Lock()
		defer portMu.Unlock()
		for {
			_, port, _ := net.SplitHostPort(freePort(b))
			if !used[port] {
				used[port] = true
				return port
			}
		}
	}
	directEpisode := func() error {
		port := envPort()
		cmd := exec.Command(filepath.Join(envDef.Dir, envDef.Command[0]))
		cmd.Dir = envDef.Dir
		cmd.Env = append(os.Environ(), "AGENTENV_PORT="+port)
		if err := cmd.Start(); err != nil {
			return err
		}
		defer func() { cmd.Process.Kill(); cmd.Wait() }()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := envclient.Connect(ctx, "http://127.0.0.1:"+port, envclient.Options{})
		if err != nil {
			return err
		}
		defer c.Close()
		for _, call := range []struct {
			name string
			args json.RawMessage
		}{{"load_day", load}, {"submit_schedule", args}, {"grade", json.RawMessage(`{}`)}} {
			if _, err := c.CallTool(ctx, call.name, call.args, 10*time.Second); err != nil {
				return err
			}
		}
		return nil
	}
	serverEpisode := func(s *client.Session, i int) error {
		ctx := context.Background()
		if _, err := s.Reset(ctx, client.ResetRequest{Split: "eval", Index: i % 200}); err != nil {
			return err
		}
		if _, err := s.Step(ctx, idleReply); err != nil {
			return err
		}
		res, err := s.Step(ctx, "done")
		if err == nil && !res.Done {
			err = fmt.Errorf("episode %d not done after its final reply", i)
		}
		return err
	}
	run := func(n int, one func(worker, i int) error) time.Duration {
		var wg sync.WaitGroup
		var mu sync.Mutex
		next := 0
		t := time.Now()
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					mu.Lock()
					i := next
					next++
					mu.Unlock()
					if i >= n {
						return
					}
					if err := one(w, i); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		return time.Since(t)
	}
	sessions := make([]*client.Session, workers)
	for i := range sessions {
		sessions[i] = dial(b, srv.addr)
	}
	run(workers, func(w, i int) error { return serverEpisode(sessions[w], i) }) // warm up
	floorN := 64
	floor := run(floorN, func(int, int) error { return directEpisode() })

	b.ResetTimer()
	took := run(b.N, func(w, i int) error { return serverEpisode(sessions[w], i) })
	b.StopTimer()
	eps := float64(b.N) / took.Seconds()
	floorEPS := float64(floorN) / floor.Seconds()
	b.ReportMetric(eps, "episodes/s")
	b.ReportMetric(floorEPS, "direct-episodes/s")
	b.ReportMetric(floorEPS/eps, "x-direct")
}

// rss is a process's resident memory, from /proc.
func rss(b *testing.B, pid int) int64 {
	b.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	b.Fatal("no VmRSS")
	return 0
}

// BenchmarkIdleSessions opens 1,000 idle WebSocket sessions on the server
// and reports its memory per session, against the floor of the same
// sessions on a bare gorilla/websocket echo server.
func BenchmarkIdleSessions(b *testing.B) {
	const n = 1000
	_, wsecho := binaries(b)
	perSession := func(p *process, probe string, wantReply string) float64 {
		open := func(k int) []*websocket.Conn {
			conns := make([]*websocket.Conn, k)
			for i := range conns {
				c, _, err := websocket.DefaultDialer.Dial("ws://"+p.addr+"/ws", nil)
				if err != nil {
					b.Fatal(err)
				}
				// One round trip, so the session is set up server-side.
				c.WriteMessage(websocket.TextMessage, []byte(probe))
				if _, m, err := c.ReadMessage(); err != nil || !strings.Contains(string(m), wantReply) {
					b.Fatalf("probe: %s %v", m, err)
				}
				conns[i] = c
			}
			return conns
		}
		for _, c := range open(50) { // warm the allocator
			c.Close()
		}
		// A measurement, not a test: the pauses let the server's RSS settle
		// (closed connections freed, new ones' buffers touched) before
		// each reading; a slow machine only makes the ratio noisier.
		time.Sleep(300 * time.Millisecond)
		before := rss(b, p.cmd.Process.Pid)
		conns := open(n)
		time.Sleep(300 * time.Millisecond)
		after := rss(b, p.cmd.Process.Pid)
		for _, c := range conns {
			c.Close()
		}
		return float64(after-before) / n
	}
	var agentenvBytes, echoBytes float64
	for b.Loop() {
		srv := serveGridsim(b)
		agentenvBytes = perSession(srv, `{"type":"state"}`, `"type":"state"`)
		echoAddr := freePort(b)
		echo := start(b, echoAddr, "/health", wsecho, "--addr", echoAddr)
		echoBytes = perSession(echo, `{"type":"state"}`, `"type":"state"`)
	}
	b.ReportMetric(agentenvBytes/1024, "KiB/session")
	b.ReportMetric(echoBytes/1024, "echo-KiB/session")
	b.ReportMetric(agentenvBytes/echoBytes, "x-echo")
}
