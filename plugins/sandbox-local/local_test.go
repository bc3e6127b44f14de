package local

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentenv/agentenv/sdk/sdktest/wait"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentenv/agentenv/sdk/config"
	"github.com/agentenv/agentenv/sdk/sandbox"
	"github.com/agentenv/agentenv/sdk/sdktest"
)

// testenvBin is core/testenv, built once for the package's tests.
var testenvBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "sandbox-local-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testenvBin = filepath.Join(dir, "testenv")
	build := exec.Command("go", "build", "-o", testenvBin, ".")
	build.Dir = filepath.Join("..", "..", "core", "testenv")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building testenv: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	if left := cleanupDocker(); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: Docker objects left behind (now removed): %v\n", left)
		code = 1
	}
	if left, _ := filepath.Glob(filepath.Join(os.TempDir(), sparePrefix+spareOwner()+"-*")); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: spare temp dirs left behind (now removed): %v\n", left)
		for _, dir := range left {
			os.RemoveAll(dir)
		}
		code = 1
	}
	if left := procsOf(testenvBin); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: testenv processes left behind: %v\n", left)
		for _, pid := range left {
			_ = syscallKill(pid)
		}
		code = 1
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// procsOf lists live processes whose argv[0] is bin.
func procsOf(bin string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		arg0, _, _ := bytes.Cut(cmdline, []byte{0})
		if string(arg0) != bin {
			continue
		}
		if f, ok := procStat(pid); ok && f[0][0] == 'Z' {
			continue
		}
		pids = append(pids, pid)
	}
	return pids
}

func newPlugin(t *testing.T, stateDir string, extra map[string]any) *Plugin {
	t.Helper()
	p := New()
	p.SetLogger(hclog.NewNullLogger())
	// No engine unless a test asks for one: the process tests' Lists must
	// not see containers other tests (or packages) run meanwhile.
	cfg := map[string]any{"state_dir": stateDir, "grace": "2s", "docker_host": "unix://" + filepath.Join(stateDir, "no-docker.sock")}
	for k, v := range extra {
		cfg[k] = v
	}
	raw, _ := json.Marshal(cfg)
	if err := p.Configure(context.Background(), raw); err != nil {
		t.Fatal(err)
	}
	// After the deploys' own cleanups (LIFO): their teardowns keep spares.
	t.Cleanup(func() {
		if err := p.Cleanup(); err != nil {
			t.Errorf("Cleanup: %v", err)
		}
	})
	return p
}

func testSpec(env ...string) sandbox.Spec {
	vars := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	return sandbox.Spec{
		Env: "testenv", Dir: filepath.Dir(testenvBin), Command: []string{"./testenv"},
		Port: 18765, EnvVars: vars, Labels: map[string]string{"agentenv.instance": "test"},
	}
}

func deploy(t *testing.T, p *Plugin, spec sandbox.Spec) sandbox.Sandbox {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sb, err := p.Deploy(ctx, spec)
	if err != nil {
		t.Fatalf("Deploy: %v", err)
	}
	t.Cleanup(func() { _ = p.Terminate(context.Background(), sb) })
	return sb
}

func echo(t *testing.T, endpoint string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	s, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint + "/mcp", HTTPClient: &http.Client{}, MaxRetries: -1, DisableStandaloneSSE: true}, nil)
	if err != nil {
		return err
	}
	defer s.Close()
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
	if err != nil {
		return err
	}
	if got := res.Content[0].(*mcp.TextContent).Text; got != "hi" {
		return fmt.Errorf("echo answered %q", got)
	}
	return nil
}

func TestLifecycle(t *testing.T) {
	stateDir := t.TempDir()
	p := newPlugin(t, stateDir, nil)
	sb := deploy(t, p, testSpec("GREETING=hello"))
	if !strings.HasPrefix(sb.Endpoint, "http://127.0.0.1:") || strings.HasSuffix(sb.Endpoint, ":18765") {
		t.Errorf("endpoint %s is not a free loopback port", sb.Endpoint)
	}
	if err := echo(t, sb.Endpoint); err != nil {
		t.Fatalf("env not reachable over MCP: %v", err)
	}
	var h handle
	if err := json.Unmarshal(sb.State, &h); err != nil || h.PID == 0 || h.Root == "" {
		t.Fatalf("State = %s (%v), want the sandbox's handle", sb.State, err)
	}
	if strings.Contains(string(sb.State), "hello") {
		t.Fatalf("the handle %s holds an env variable's value", sb.State)
	}
	// The state file is written before the start, so it holds no pid: the
	// handle does (a restarted plugin finds the env by its sandbox id).
	st, err := readState(stateDir, sb.ID)
	if err != nil || st.PID != 0 || st.Root != h.Root || st.Port != h.Port {
		t.Fatalf("state file: %+v, %v; want no pid, the handle's root and port", st, err)
	}
	if _, err := os.Stat(filepath.Join(stateDir, sb.ID+".json")); err != nil {
		t.Fatalf("no state file: %v", err)
	}

	res, err := p.Exec(context.Background(), sb, []string{"sh", "-c", `echo "$GREETING $AGENTENV_SANDBOX_ID"; pwd; echo oops >&2; exit 3`})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(res.Stdout), "\n")
	if res.ExitCode != 3 || len(lines) != 2 || lines[0] != "hello "+sb.ID || lines[1] != st.WorkDir || strings.TrimSpace(res.Stderr) != "oops" {
		t.Fatalf("Exec = %+v, want exit 3, greeting, work dir %s, stderr oops", res, st.WorkDir)
	}

	got, err := p.List(context.Background(), map[string]string{"agentenv.instance": "test"})
	if err != nil || len(got) != 1 || got[0].ID != sb.ID || got[0].Labels["agentenv.instance"] != "test" {
		t.Fatalf("List = %+v, %v", got, err)
	}
	if got, _ := p.List(context.Background(), map[string]string{"agentenv.instance": "other"}); len(got) != 0 {
		t.Fatalf("List with another label = %+v", got)
	}

	if err := p.Terminate(context.Background(), sb); err != nil {
		t.Fatal(err)
	}
	if members := groupMembers(h.PGID); len(members) > 0 {
		t.Fatalf("group %d still has %v", h.PGID, members)
	}
	for _, path := range []string{st.Root, filepath.Join(stateDir, sb.ID+".json")} {
		if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still exists after Terminate", path)
		}
	}
	err = p.Terminate(context.Background(), sb)
	if !errors.Is(err, sandbox.ErrNotFound) || !strings.Contains(err.Error(), sb.ID) {
		t.Fatalf("second Terminate = %v, want ErrNotFound naming the id", err)
	}
}

func TestTerminateAcrossPluginRestart(t *testing.T) {
	stateDir := t.TempDir()
	first := newPlugin(t, stateDir, nil)
	sb := deploy(t, first, testSpec("TESTENV_CHILD=1"))
	var st handle
	_ = json.Unmarshal(sb.State, &st)
	wait.Until(t, "the env's child to start", func() bool { return len(groupMembers(st.PGID)) == 2 })

	second := newPlugin(t, stateDir, nil) // a new plugin process, as after a restart
	got, err := second.List(context.Background(), map[string]string{"agentenv.instance": "test"})
	if err != nil || len(got) != 1 || got[0].ID != sb.ID {
		t.Fatalf("new plugin's List = %+v, %v; want the earlier sandbox", got, err)
	}
	if err := second.Terminate(context.Background(), sb); err != nil {
		t.Fatal(err)
	}
	if members := groupMembers(st.PGID); len(members) > 0 {
		t.Fatalf("env or its child survived: %v", members)
	}
	if _, err := first.Exec(context.Background(), sb, []string{"true"}); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("Exec after Terminate = %v, want ErrNotFound", err)
	}
}

func TestTerminateKillsAfterGrace(t *testing.T) {
	p := newPlugin(t, t.TempDir(), map[string]any{"grace": "200ms"})
	sb := deploy(t, p, testSpec("TESTENV_IGNORE_TERM=1"))
	start := time.Now()
	if err := p.Terminate(context.Background(), sb); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Fatalf("Terminate took %s: it did not wait the grace period before SIGKILL", d)
	}
	var st handle
	_ = json.Unmarshal(sb.State, &st)
	if members := groupMembers(st.PGID); len(members) > 0 {
		t.Fatalf("env ignoring SIGTERM survived: %v", members)
	}
}

func TestTerminateCancelledContextStillKills(t *testing.T) {
	p := newPlugin(t, t.TempDir(), map[string]any{"grace": "1m"})
	sb := deploy(t, p, testSpec("TESTENV_IGNORE_TERM=1"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := p.Terminate(ctx, sb); err != nil {
		t.Fatal(err)
	}
	var st handle
	_ = json.Unmarshal(sb.State, &st)
	if members := groupMembers(st.PGID); len(members) > 0 {
		t.Fatalf("env survived a cancelled Terminate: %v", members)
	}
}

func TestDeployFailures(t *testing.T) {
	tests := []struct {
		name    string
		spec    sandbox.Spec
		timeout time.Duration
		want    []string
	}{
		{"image only", sandbox.Spec{Env: "web", Image: "nginx:latest"}, 5 * time.Second,
			[]string{`env "web"`, "only an image", "nginx:latest", "command"}},
		{"nothing to run", sandbox.Spec{Env: "web"}, 5 * time.Second, []string{`env "web"`, "no command"}},
		{"missing program", sandbox.Spec{Env: "gone", Dir: t.TempDir(), Command: []string{"bin/nope"}}, 5 * time.Second,
			[]string{`env "gone"`, "bin/nope", "no such file"}},
		{"exits at start", testSpec("TESTENV_FAIL_START=1"), 10 * time.Second,
			[]string{`env "testenv"`, "exited before listening", "exit status 2", "failing to start as asked"}},
		{"never answers", testSpec("TESTENV_START_DELAY=1m"), 700 * time.Millisecond,
			[]string{`env "testenv"`, "not listening on port", "deadline exceeded"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			stateDir := t.TempDir()
			p := newPlugin(t, stateDir, map[string]any{"grace": "200ms", "mode": "process"})
			ctx, cancel := context.WithTimeout(context.Background(), tc.timeout)
			defer cancel()
			_, err := p.Deploy(ctx, tc.spec)
			if err == nil {
				t.Fatal("Deploy succeeded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			if left := stateLeft(stateDir); len(left) != 0 {
				t.Errorf("state left after a failed deploy: %v", left)
			}
			if left := procsOf(testenvBin); len(left) > 0 {
				t.Errorf("failed deploy left env processes %v", left)
			}
		})
	}
}

func TestListForgetsDeadAndReusedPIDs(t *testing.T) {
	stateDir := t.TempDir()
	p := newPlugin(t, stateDir, nil)
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	self := os.Getpid()
	selfStart, _ := procStart(self)
	for _, st := range []*state{
		{ID: "local-dead", handle: handle{PID: dead.Process.Pid, PGID: dead.Process.Pid, ProcStart: 1}},
		// Our own pid with another start time: a pid reused by an unrelated
		// process, which must never be signalled.
		{ID: "local-reused", handle: handle{PID: self, PGID: self, ProcStart: selfStart + 1}},
	} {
		st.Labels = map[string]string{"agentenv.instance": "test"}
		if err := writeState(stateDir, st); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(stateDir, "garbage.json"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := p.List(context.Background(), nil)
	if err != nil || len(got) != 0 {
		t.Fatalf("List = %+v, %v; want nothing live", got, err)
	}
	for _, id := range []string{"local-dead", "local-reused"} {
		if _, err := os.Stat(filepath.Join(stateDir, id+".json")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("stale state %s kept", id)
		}
	}
	// Terminate on a reused pid returns without signalling it (we are alive to check).
	st := &state{ID: "local-reused2", handle: handle{PID: self, PGID: self, ProcStart: selfStart + 1}}
	if err := writeState(stateDir, st); err != nil {
		t.Fatal(err)
	}
	if err := p.Terminate(context.Background(), sandbox.Sandbox{ID: st.ID}); err != nil {
		t.Fatal(err)
	}
}

func TestExec(t *testing.T) {
	p := newPlugin(t, t.TempDir(), nil)
	sb := deploy(t, p, testSpec())
	script := filepath.Join(filepath.Dir(testenvBin), "check.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho 0.75\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		cmd      []string
		timeout  time.Duration
		wantOut  string
		wantCode int
		wantErr  string
	}{
		{"stdout", []string{"echo", "ok"}, 5 * time.Second, "ok\n", 0, ""},
		{"exit code", []string{"sh", "-c", "exit 7"}, 5 * time.Second, "", 7, ""},
		{"relative to env dir", []string{"./check.sh"}, 5 * time.Second, "0.75\n", 0, ""},
		{"timeout", []string{"sh", "-c", "sleep 30"}, 300 * time.Millisecond, "", 0, "deadline exceeded"},
		{"background child does not hang it", []string{"sh", "-c", "sleep 30 & echo started"}, 10 * time.Second, "started\n", 0, ""},
		{"empty", []string{}, time.Second, "", 0, "empty command"},
		{"not found", []string{"no-such-program-xyz"}, time.Second, "", 0, "no-such-program-xyz"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), tc.timeout)
			defer cancel()
			start := time.Now()
			res, err := p.Exec(ctx, sb, tc.cmd)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.Stdout != tc.wantOut || res.ExitCode != tc.wantCode {
				t.Fatalf("Exec = %+v, want stdout %q exit %d", res, tc.wantOut, tc.wantCode)
			}
			if time.Since(start) > 8*time.Second {
				t.Fatalf("Exec took %s", time.Since(start))
			}
		})
	}
	if _, err := p.Exec(context.Background(), sandbox.Sandbox{ID: "local-unknown"}, []string{"true"}); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("Exec(unknown) = %v, want ErrNotFound", err)
	}
	if _, err := p.Exec(context.Background(), sandbox.Sandbox{ID: "../../etc/passwd"}, []string{"true"}); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("Exec(path id) = %v, want ErrNotFound", err)
	}
}

func TestConcurrentDeploys(t *testing.T) {
	p := newPlugin(t, t.TempDir(), nil)
	const n = 6
	var wg sync.WaitGroup
	sbs := make([]sandbox.Sandbox, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			sbs[i], errs[i] = p.Deploy(ctx, testSpec())
		}()
	}
	wg.Wait()
	seen := map[string]bool{}
	for i := range n {
		if errs[i] != nil {
			t.Errorf("deploy %d: %v", i, errs[i])
			continue
		}
		if seen[sbs[i].Endpoint] {
			t.Errorf("endpoint %s handed out twice", sbs[i].Endpoint)
		}
		seen[sbs[i].Endpoint] = true
		if err := echo(t, sbs[i].Endpoint); err != nil {
			t.Errorf("sandbox %d: %v", i, err)
		}
	}
	for i := range n {
		if errs[i] == nil {
			if err := p.Terminate(context.Background(), sbs[i]); err != nil {
				t.Error(err)
			}
		}
	}
}

func TestDeployCancelled(t *testing.T) {
	stateDir := t.TempDir()
	p := newPlugin(t, stateDir, map[string]any{"grace": "200ms"})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		// Room for Deploy to start the env (which then waits a minute). A
		// cancel that comes earlier fails Deploy the same way and must
		// leave no state either, so load cannot fail the test.
		time.Sleep(300 * time.Millisecond)
		cancel()
	}()
	_, err := p.Deploy(ctx, testSpec("TESTENV_START_DELAY=1m"))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Deploy = %v, want context.Canceled", err)
	}
	if left := stateLeft(stateDir); len(left) != 0 {
		t.Fatalf("state left: %v", left)
	}
}

func TestConfigure(t *testing.T) {
	tests := []struct {
		config, want string
	}{
		{`{"grace":"soon"}`, `grace: "soon": not a duration`},
		{`{"grace":5}`, `grace: 5: a duration is a string with a unit, like "5s"`},
		{`{"grace":"-1s"}`, `grace: "-1s": a duration must not be negative`},
		{`{"ready_timeout":"0s"}`, `ready_timeout and build_timeout must be positive`},
		{`{"state_dir":""}`, `state_dir is empty`},
		{`{"pass_env":["A=B"]}`, `pass_env entry "A=B"`},
		{`{"colour":"red"}`, `unknown setting "colour"; the settings are: build_timeout, default_cpu, default_memory_mb, docker_host, grace, log_max_mb, mode, parallel_builds, parallel_ops, pass_env, pids_limit, ready_timeout, state_dir, subnet_base, subnet_size, terminal_binary, tmpfs_mb`},
		{`{"mode":"vm"}`, `mode "vm": use auto, docker or process`},
		{`{"pids_limit":0}`, `pids_limit, default_cpu, tmpfs_mb and parallel_ops must be positive`},
		{`{"default_memory_mb":4}`, `default_memory_mb at least 6`},
		{`{"subnet_base":"10.1.2.3/16"}`, `did you mean 10.1.0.0/16?`},
		{`{"subnet_base":"fd00::/64"}`, `give an IPv4 prefix`},
		{`{"subnet_size":12}`, `subnet_size 12: must be between the base's /16 and /29`},
		{`{"subnet_base":"10.0.0.0/8","subnet_size":29}`, `more than 1048576 networks`},
		{`[1]`, `sandbox-local config`},
		{`{"parallel_builds":0}`, `parallel_builds 0: give the most image builds to run at once`},
		{`{"terminal_binary":"/no/such/agentenv-terminal"}`, `terminal_binary: terminal binary /no/such/agentenv-terminal: stat /no/such/agentenv-terminal: no such file or directory; build it with`},
		{`{"terminal_binary":"/bin/sh"}`, `terminal binary /bin/sh is dynamically linked (it needs a loader the container may lack); build it with`},
		{`{"terminal_binary":"testdata/dockerenv/main.go"}`, `is not an executable file`},
	}
	for _, tc := range tests {
		t.Run(tc.config, func(t *testing.T) {
			err := New().Configure(context.Background(), json.RawMessage(tc.config))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Configure(%s) = %v, want %q", tc.config, err, tc.want)
			}
		})
	}
	p := New()
	if err := p.Configure(context.Background(), json.RawMessage(`{"state_dir":"rel","grace":"1s","ready_timeout":"2s","pass_env":["LANG"]}`)); err != nil {
		t.Fatal(err)
	}
	cfg := p.config()
	if !filepath.IsAbs(cfg.StateDir) || cfg.Grace != config.Duration(time.Second) || cfg.ReadyTimeout != config.Duration(2*time.Second) || cfg.PassEnv[0] != "LANG" {
		t.Fatalf("config = %+v", cfg)
	}
	if err := p.Configure(context.Background(), nil); err != nil || p.config().Grace != config.Duration(5*time.Second) {
		t.Fatalf("empty config should restore defaults: %v %+v", err, p.config())
	}
	sdktest.ConfigSchemaMatches(t, p.Info().ConfigSchema, Config{})
}

// stateLeft lists the state files and port reservations in stateDir.
// stateLeft lists what records a sandbox in stateDir: anything but this
// process's spares (state files cut to a byte, released reservations).
func stateLeft(stateDir string) []string {
	var left []string
	entries, _ := os.ReadDir(stateDir)
	for _, e := range entries {
		if e.Name() == "ports" {
			continue
		}
		if fi, err := e.Info(); err == nil && fi.Size() <= 1 && strings.HasPrefix(e.Name(), spareFilePrefix+spareOwner()+"-") {
			continue
		}
		left = append(left, e.Name())
	}
	ports, _ := os.ReadDir(portsDir(stateDir))
	for _, e := range ports {
		if !strings.HasPrefix(e.Name(), spareFilePrefix+spareOwner()+"-") {
			left = append(left, "ports/"+e.Name())
		}
	}
	return left
}
