package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentenv/agentenv/sdk/sdktest/wait"

	"github.com/gorilla/websocket"

	"github.com/agentenv/agentenv/sdk/sdktest"
)

const e2eToken = "e2e-token-9f8e7d"

// The main job: serve GridSim with the process sandbox and a token, play
// a day by hand (agentenv play) and as OpenEnv's client would, then stop
// with SIGTERM: exit 0, nothing left.
func TestServeGridsimEndToEnd(t *testing.T) {
	state := t.TempDir()
	addr := freeAddr(t)
	s := startServe(t, gridsimBundle, addr, state, []string{"E2E_TOKEN=" + e2eToken}, "--token-var", "E2E_TOKEN")

	// Token: 401 without it, on HTTP and on the upgrade; /health is open.
	for _, path := range []string{"/metadata", "/splits", "/metrics", "/ws"} {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 401 {
			t.Errorf("%s without token: %d", path, resp.StatusCode)
		}
	}
	if _, resp, err := websocket.DefaultDialer.Dial("ws://"+addr+"/ws", nil); err == nil || resp.StatusCode != 401 {
		t.Errorf("upgrade without token: %v", err)
	}
	if strings.Contains(s.log.String(), e2eToken) {
		t.Fatal("the token appears in the server's log")
	}

	// The catalogue: a split's tasks, one task, its toolset's tools (the
	// first call deploys an env to list them; SIGTERM must take it down).
	getJSON := func(path string, v any) {
		t.Helper()
		req, _ := http.NewRequest("GET", "http://"+addr+path, nil)
		req.Header.Set("Authorization", "Bearer "+e2eToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d", path, resp.StatusCode)
		}
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
	}
	var page struct {
		Size  int
		Tasks []struct {
			Index   int
			TaskID  string `json:"task_id"`
			Toolset string
		}
	}
	getJSON("/splits/eval/tasks?start=0&stop=2", &page)
	if page.Size != 200 || len(page.Tasks) != 2 || page.Tasks[1].TaskID != "day/eval-002" || page.Tasks[0].Toolset == "" {
		t.Fatalf("eval tasks: %+v", page)
	}
	var task struct {
		Prompt []struct{ Role, Content string }
	}
	getJSON("/tasks/day/eval-001", &task)
	if len(task.Prompt) != 2 || !strings.Contains(task.Prompt[1].Content, "Day-ahead prices") {
		t.Fatalf("task: %+v", task)
	}
	var tools struct {
		Tools []struct{ Function struct{ Name string } }
	}
	getJSON("/toolsets/"+page.Tasks[0].Toolset+"/tools", &tools)
	if len(tools.Tools) != 2 || tools.Tools[0].Function.Name != "get_prices" || tools.Tools[1].Function.Name != "submit_schedule" {
		t.Fatalf("toolset tools: %+v", tools)
	}

	// OpenEnv GenericEnvClient's exchange, byte for byte.
	c := dialServe(t, addr, e2eToken)
	final, err := playIdleDay(c, 0)
	if err != nil {
		t.Fatal(err)
	}
	obs := final["observation"].(map[string]any)
	metrics := obs["metrics"].(map[string]any)
	if final["done"] != true || final["reward"] != 0.2 || metrics["score/grade"] != 0.2 || metrics["tool_calls"] != 1.0 || obs["task_id"] != "day/eval-001" {
		t.Fatalf("final observation: %v", final)
	}
	if typ, st, _ := c.call(`{"type": "state"}`); typ != "state" || st["step_count"] != 2.0 || st["done"] != true {
		t.Fatalf("state: %s %v", typ, st)
	}
	c.conn.WriteMessage(websocket.TextMessage, []byte(`{"type": "close"}`))
	if _, _, err := c.conn.ReadMessage(); !websocket.IsCloseError(err, websocket.CloseNormalClosure) {
		t.Fatalf("after close: %v", err)
	}

	// The quickstart: agentenv play with the replies piped in.
	play := exec.Command(agentenv(t), "play", "http://"+addr, "--split", "eval", "--index", "1", "--token-var", "E2E_TOKEN")
	play.Env = append(play.Environ(), "E2E_TOKEN="+e2eToken)
	play.Stdin = strings.NewReader(strings.ReplaceAll(strings.ReplaceAll(idleSchedule, `\n`, "\n"), `\"`, `"`) + "\n.\nDone.\n.\n")
	out, err := play.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "submit_schedule") || !strings.Contains(string(out), "reward 0.2") {
		t.Fatalf("agentenv play: %v\n%s", err, out)
	}

	text := metricsText(t, addr, e2eToken)
	if metric(text, `agentenv_episodes_total{outcome="done"}`) != 2 || metric(text, `agentenv_episode_phase_seconds_count{env="gridsim",phase="queue",sandbox="local"}`) != 2 {
		t.Fatalf("metrics after two episodes:\n%s", text)
	}
	if code := s.signalAndWait(t, syscall.SIGTERM, 10*time.Second); code != 0 {
		t.Fatalf("exit %d after SIGTERM:\n%s", code, s.log)
	}
	if left := stateFiles(t, state); len(left) != 0 {
		t.Fatalf("sandboxes left after SIGTERM: %v", left)
	}
}

// 64 concurrent episodes against --max-concurrent-envs 16: all complete,
// never more than 16 live, and the queue shows in /metrics.
func TestServeConcurrentEpisodesQueue(t *testing.T) {
	state := t.TempDir()
	addr := freeAddr(t)
	s := startServe(t, gridsimBundle, addr, state, nil, "--max-concurrent-envs", "16")
	var maxQueue, maxLive float64
	stop, polled := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(polled)
		for {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			resp, err := http.Get("http://" + addr + "/metrics")
			if err != nil {
				continue
			}
			var b strings.Builder
			buf := make([]byte, 32<<10)
			for {
				n, err := resp.Body.Read(buf)
				b.Write(buf[:n])
				if err != nil {
					break
				}
			}
			resp.Body.Close()
			maxQueue = max(maxQueue, metric(b.String(), "agentenv_reset_queue_depth"))
			maxLive = max(maxLive, metric(b.String(), "agentenv_episodes_live"))
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := dialServe(t, addr, "")
			final, err := playIdleDay(c, i)
			if err == nil && final["reward"] != 0.2 {
				err = fmt.Errorf("episode %d: reward %v", i, final["reward"])
			}
			if err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-polled
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	text := metricsText(t, addr, "")
	if done := metric(text, `agentenv_episodes_total{outcome="done"}`); done != 64 {
		t.Errorf("%v episodes done, want 64", done)
	}
	if maxQueue < 1 || maxLive > 16 {
		t.Errorf("max queue depth %v, max live %v: want a queue and at most 16 live", maxQueue, maxLive)
	}
	if code := s.signalAndWait(t, syscall.SIGTERM, 10*time.Second); code != 0 {
		t.Fatalf("exit %d:\n%s", code, s.log)
	}
}

// SIGTERM with 32 live episodes: each session is told SHUTTING_DOWN, every
// env process is gone within 10 s, and the server exits 0.
func TestServeSigtermTearsDownLiveEpisodes(t *testing.T) {
	state := t.TempDir()
	addr := freeAddr(t)
	s := startServe(t, gridsimBundle, addr, state, nil)
	clients := make([]*e2eClient, 32)
	var wg sync.WaitGroup
	for i := range clients {
		clients[i] = dialServe(t, addr, "")
		wg.Add(1)
		go func() {
			defer wg.Done()
			if typ, d, err := clients[i].call(`{"type":"reset","data":{"split":"train","index":` + strconv.Itoa(i) + `}}`); err != nil || typ != "observation" {
				t.Errorf("reset %d: %s %v %v", i, typ, d, err)
			}
		}()
	}
	wg.Wait()
	procs := stateFiles(t, state)
	if len(procs) != 32 {
		t.Fatalf("%d env processes for 32 live episodes", len(procs))
	}
	start := time.Now()
	if code := s.signalAndWait(t, syscall.SIGTERM, 10*time.Second); code != 0 {
		t.Fatalf("exit %d:\n%s", code, s.log)
	}
	for _, p := range procs {
		if alive(p.PID) {
			t.Errorf("env process %d alive %s after SIGTERM", p.PID, time.Since(start))
		}
	}
	if left := stateFiles(t, state); len(left) != 0 {
		t.Errorf("%d state files left", len(left))
	}
	for i, c := range clients {
		c.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, b, err := c.conn.ReadMessage()
		if err != nil || !strings.Contains(string(b), `"code":"SHUTTING_DOWN"`) {
			t.Errorf("client %d: %s %v, want SHUTTING_DOWN", i, b, err)
		}
	}
}

// SIGKILL leaves env processes behind; the next serve of the same bundle
// on the same address reaps every one before serving.
func TestServeRestartReapsAfterSigkill(t *testing.T) {
	state := t.TempDir()
	addr := freeAddr(t)
	s := startServe(t, gridsimBundle, addr, state, nil)
	for i := range 6 {
		c := dialServe(t, addr, "")
		c.observation(`{"type":"reset","data":{"split":"all","index":` + strconv.Itoa(i) + `}}`)
	}
	procs := stateFiles(t, state)
	if len(procs) != 6 {
		t.Fatalf("%d env processes for 6 live episodes", len(procs))
	}
	s.signalAndWait(t, syscall.SIGKILL, 10*time.Second)
	// Room for envs that die with the server to go: the count below only
	// checks that some outlive it, so the test has something to reap.
	time.Sleep(200 * time.Millisecond)
	orphans := 0
	for _, p := range procs {
		if alive(p.PID) {
			orphans++
		}
	}
	if orphans == 0 {
		t.Fatal("SIGKILL left no env process: nothing to reap, the test proves nothing")
	}
	again := startServe(t, gridsimBundle, addr, state, nil)
	for _, p := range procs {
		if alive(p.PID) {
			t.Errorf("env process %d survived the restart", p.PID)
		}
	}
	if left := stateFiles(t, state); len(left) != 0 {
		t.Errorf("state files left after the restart: %v", left)
	}
	if !strings.Contains(again.log.String(), "reaped sandboxes an earlier run left behind") {
		t.Errorf("restart did not log the reaping:\n%s", again.log)
	}
	if code := again.signalAndWait(t, syscall.SIGTERM, 10*time.Second); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

// A bad start is refused with the reason, before serving anything.
func TestServeRefusesBadStart(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	busy := ln.Addr().String()
	cases := []struct {
		name   string
		bundle string
		env    []string
		args   []string
		want   string
	}{
		{"missing bundle", "./no-such-bundle", nil, nil, "no-such-bundle"},
		{"several scores and no reward", "../../core/bundle/testdata/verifiers", nil, nil, "task scored has several verifier steps"},
		{"reward step missing", gridsimBundle, nil, []string{"--reward", "score:nope"}, `no verifier step "nope"`},
		{"empty token variable", gridsimBundle, nil, []string{"--token-var", "E2E_UNSET_TOKEN"}, "E2E_UNSET_TOKEN"},
		{"no capacity", gridsimBundle, nil, []string{"--max-concurrent-envs", "0"}, "at least 1"},
		{"unknown sandbox", gridsimBundle, nil, []string{"--sandbox", "nosuch"}, `sandbox "nosuch"`},
		{"bad sandbox config", gridsimBundle, nil, []string{"--sandbox-config", "colour=blue"}, "colour"},
		{"unknown reward plugin", gridsimBundle, nil, []string{"--reward", "median"}, `reward "median"`},
		{"port in use", gridsimBundle, nil, []string{"--addr", busy}, "address already in use"},
		{"port in use names --addr", gridsimBundle, nil, []string{"--addr", busy}, "choose another address, e.g. --addr 127.0.0.1:"},
		{"a number where the sandbox wants a duration", gridsimBundle, nil, []string{"--sandbox-config", "grace=5"}, `write grace=5s`},
		{"no bundle", "", nil, nil, "serve needs the bundle folder to serve"},
		// The sandbox cannot run the env: refused at start, not at every reset.
		{"an env the sandbox cannot run", imageOnlyBundle(t), nil, nil, `env "web"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"serve"}
			if tc.bundle != "" {
				args = append(args, tc.bundle)
			}
			args = append(append(args, "--addr", "127.0.0.1:0", "--sandbox-config", "state_dir="+t.TempDir(), "--sandbox-config", "mode=process"), tc.args...)
			// A server that wrongly starts is killed, and the case fails.
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, agentenv(t), args...)
			cmd.Env = append(cmd.Environ(), tc.env...)
			out, err := cmd.CombinedOutput()
			if err == nil || ctx.Err() != nil || !strings.Contains(string(out), tc.want) {
				t.Fatalf("got %v, want a refusal with %q:\n%s", err, tc.want, out)
			}
		})
	}
}

// imageOnlyBundle is a bundle whose one env has only an image (no
// command, no Dockerfile to build it from).
func imageOnlyBundle(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for path, text := range map[string]string{
		"README.md":         "An env with only an image.\n",
		"envs/web/env.toml": "image = \"agentenv-test/no-such-image:1\"\n",
		"tasks/t.json": `[{"id": "env", "type": "deploy_env", "env": "web"},
 {"id": "ask", "type": "prompt_agent", "prompt": "Say hi."},
 {"id": "check", "type": "verify_answer", "turn": "ask", "expected": "hi"}]`,
	} {
		full := filepath.Join(dir, path)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// pythonWithWebsockets finds a python3 that can import websockets (the
// library OpenEnv's client is built on): Debian's python3-websockets is
// for /usr/bin/python3, which may not be the python3 first on PATH.
func pythonWithWebsockets() string {
	for _, py := range []string{"/usr/bin/python3", "python3"} {
		if exec.Command(py, "-c", "import websockets").Run() == nil {
			return py
		}
	}
	return ""
}

// A Python client over the websockets library, written from OpenEnv's
// GenericEnvClient exchange, plays a GridSim day against the real server,
// authenticating as the stock client can: the token as URL userinfo.
func TestServeOpenEnvPythonClient(t *testing.T) {
	py := pythonWithWebsockets()
	if py == "" {
		sdktest.Missing(t, "python3 with websockets", "no python3 imports websockets", "apt-get install python3-websockets")
	}
	addr := freeAddr(t)
	s := startServe(t, gridsimBundle, addr, t.TempDir(), []string{"E2E_TOKEN=" + e2eToken}, "--token-var", "E2E_TOKEN")
	cmd := exec.Command(py, "testdata/openenv_client.py", "http://openenv:"+e2eToken+"@"+addr)
	cmd.Env = append(os.Environ(), "NO_PROXY=127.0.0.1", "no_proxy=127.0.0.1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python client: %v\n%s\nserver log:\n%s", err, out, s.log)
	}
	got := map[string]map[string]any{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("client printed %q", line)
		}
		got[m["step"].(string)] = m
	}
	want := map[string]map[string]any{
		"reset-empty": {"error": "Server error: Invalid reset: data.task_id: Field required: reset needs task_id, or split and index (code: VALIDATION_ERROR)"},
		"reset":       {"task_id": "day/eval-001", "roles": []any{"system", "user"}, "tools": []any{"get_prices", "submit_schedule"}, "reward": nil, "done": false},
		"submit":      {"roles": []any{"tool"}, "reward": nil, "done": false},
		"state":       {"step_count": 1.0},
		"final":       {"reward": 0.2, "done": true},
		"closed":      {"code": 1000.0},
	}
	for step, fields := range want {
		for k, v := range fields {
			if !reflect.DeepEqual(got[step][k], v) {
				t.Errorf("%s.%s = %#v, want %#v", step, k, got[step][k], v)
			}
		}
	}
	if m, _ := got["final"]["metrics"].(map[string]any); m["score/grade"] != 0.2 || m["tool_calls"] != 1.0 {
		t.Errorf("final metrics %v", got["final"]["metrics"])
	}
	if id, _ := got["state"]["episode_id"].(string); id == "" {
		t.Errorf("state has no episode id: %v", got["state"])
	}
}

// slowTeardownBundle copies GridSim into a temp dir with an env whose
// process group outlives SIGTERM (a shell that ignores it keeps sleeping
// after the env exits), so a teardown waits out the sandbox's grace.
func slowTeardownBundle(t *testing.T) string {
	t.Helper()
	src, err := filepath.Abs(gridsimBundle)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "slowgrid")
	if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	envDir := filepath.Join(dir, "envs", "gridsim")
	bin := filepath.Join(envDir, "bin", "gridsim-env")
	toml := fmt.Sprintf(`build = ["go", "build", "-C", %q, "-o", %q, "."]
command = ["sh", "-c", "trap '' TERM; %s; sleep 120"]
port = 18765
`, filepath.Join(src, "envs", "gridsim"), bin, bin)
	if err := os.WriteFile(filepath.Join(envDir, "env.toml"), []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// A second SIGTERM during a slow drain exits at once (status 1); the next
// start reaps what the cut-short drain left.
func TestServeSecondSignalExitsAtOnce(t *testing.T) {
	bundleDir := slowTeardownBundle(t)
	state := t.TempDir()
	addr := freeAddr(t)
	s := startServe(t, bundleDir, addr, state, nil, "--sandbox-config", "grace=60s")
	for i := range 2 {
		c := dialServe(t, addr, "")
		c.observation(`{"type":"reset","data":{"split":"eval","index":` + strconv.Itoa(i) + `}}`)
	}
	procs := stateFiles(t, state)
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// The drain is stuck on the 60 s grace: the server says so meanwhile.
	// The guard stays under the 60 s grace.
	wait.For(t, "/health to say draining", func() error {
		resp, err := http.Get("http://" + addr + "/health")
		if err != nil {
			return fmt.Errorf("%w; the server's log:\n%s", err, s.log)
		}
		resp.Body.Close()
		if resp.StatusCode != 503 {
			return fmt.Errorf("/health: %d", resp.StatusCode)
		}
		return nil
	}, wait.Timeout(30*time.Second))
	start := time.Now()
	if code := s.signalAndWait(t, syscall.SIGTERM, 5*time.Second); code != 1 {
		t.Fatalf("exit %d after the second signal, want 1:\n%s", code, s.log)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("second signal took %s to exit", d)
	}
	if !strings.Contains(s.log.String(), "second signal: exiting now") {
		t.Fatalf("no log of the second signal:\n%s", s.log)
	}
	again := startServe(t, bundleDir, addr, state, nil, "--sandbox-config", "grace=100ms")
	for _, p := range procs {
		if alive(p.PID) {
			t.Errorf("env process %d survived the restart", p.PID)
		}
	}
	if code := again.signalAndWait(t, syscall.SIGTERM, 10*time.Second); code != 0 {
		t.Fatalf("exit %d:\n%s", code, again.log)
	}
}

// An idle session is closed after --idle-timeout and its env process goes.
func TestServeIdleSessionExpires(t *testing.T) {
	state := t.TempDir()
	addr := freeAddr(t)
	s := startServe(t, gridsimBundle, addr, state, nil, "--idle-timeout", "1s")
	c := dialServe(t, addr, "")
	c.observation(`{"type":"reset","data":{"split":"eval","index":5}}`)
	procs := stateFiles(t, state)
	if len(procs) != 1 {
		t.Fatalf("%d env processes for one episode", len(procs))
	}
	c.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, _, err := c.conn.ReadMessage()
	if !websocket.IsCloseError(err, websocket.CloseNormalClosure) || !strings.Contains(err.Error(), "idle timeout") {
		t.Fatalf("got %v, want close 1000 idle timeout", err)
	}
	wait.For(t, "the env to go after the idle timeout", func() error {
		if alive(procs[0].PID) {
			return fmt.Errorf("env process %d still there", procs[0].PID)
		}
		if left := stateFiles(t, state); len(left) > 0 {
			return fmt.Errorf("state files left: %+v", left)
		}
		return nil
	})
	if code := s.signalAndWait(t, syscall.SIGTERM, 10*time.Second); code != 0 {
		t.Fatalf("exit %d", code)
	}
}
