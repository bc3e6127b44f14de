package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentenv/agentenv/sdk/sdktest/wait"

	"github.com/hashicorp/go-hclog"

	"github.com/agentenv/agentenv/core/episode"
	"github.com/agentenv/agentenv/core/pluginhost"
	"github.com/agentenv/agentenv/core/testenv/testenvbuild"
)

// Binaries built once: the test env and the plugins, run as real
// subprocesses by the plugin host.
var (
	testenvBin string
	pluginDir  string
)

var pluginSources = map[string]string{
	"agentenv-sandbox-local":     "../../plugins/sandbox-local/cmd/agentenv-sandbox-local",
	"agentenv-toolformat-hermes": "../../plugins/toolformat-hermes/cmd/agentenv-toolformat-hermes",
}

func TestMain(m *testing.M) {
	if dir := os.Getenv(claimHolderVar); dir != "" {
		holdClaim(dir) // a helper process of TestClaimDiesWithProcess: it builds nothing
		return
	}
	dir, err := os.MkdirTemp("", "runtime-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if testenvBin, err = testenvbuild.Build(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	pluginDir = filepath.Join(dir, "plugins")
	if _, err := testenvbuild.BuildCommands(pluginDir, pluginSources); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if left := testenvbuild.Procs(testenvBin); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: env processes left behind after the suite: %v\n", left)
		code = 1
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// testBundle writes a one-task bundle whose env is the test env, with
// extra lines in its env.toml.
func testBundle(t *testing.T, envExtra ...string) string {
	t.Helper()
	dir := t.TempDir()
	if err := testenvbuild.WriteBundle(dir, testenvBin, strings.Join(envExtra, "\n")); err != nil {
		t.Fatal(err)
	}
	return dir
}

func openRuntime(t *testing.T, envExtra ...string) *Runtime {
	return openRuntimeWith(t, nil, envExtra...)
}

// openRuntimeWith is openRuntime with tune adjusting the options.
func openRuntimeWith(t *testing.T, tune func(*Options), envExtra ...string) *Runtime {
	t.Helper()
	cfg, _ := json.Marshal(map[string]string{"state_dir": t.TempDir(), "grace": "1s"})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	o := Options{
		SandboxConfig: cfg, ToolFormat: "hermes", ServerID: "runtime-test", ServersDir: t.TempDir(),
		Logger: hclog.New(&hclog.LoggerOptions{Level: hclog.Warn, Output: os.Stderr}),
		Plugins: pluginhost.Options{
			SelfExe: "/nonexistent/agentenv", SearchPath: []string{pluginDir}, Builtins: []string{},
			CachePath: "-", PollInterval: 50 * time.Millisecond,
		},
	}
	if tune != nil {
		tune(&o)
	}
	rt, err := Open(ctx, testBundle(t, envExtra...), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := rt.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return rt
}

// sandboxPIDs are the processes serving the sandbox plugin now.
func sandboxPIDs(t *testing.T, rt *Runtime) []int {
	t.Helper()
	entries, err := rt.Host.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.ID() == "sandbox-local" {
			return e.PIDs
		}
	}
	return nil
}

// The sandbox plugin is killed after it deployed an episode's env. The
// host restarts it, and the episode's teardown reaches the env through the
// new process with nothing but the handle the engine kept — whether the
// teardown comes after the restart or while the plugin is still down (then
// the failed Terminate is retried until the new process answers).
func TestTeardownThroughARestartedSandboxPlugin(t *testing.T) {
	for _, tc := range []struct {
		name          string
		awaitRestart  bool
		wantRestarted int64
	}{
		{"teardown after the restart", true, 1},
		{"teardown while the plugin is down", false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := openRuntime(t)
			ep, err := rt.Engine.Play(episode.Request{TaskID: "puzzle"})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if _, err := ep.Start(ctx); err != nil {
				t.Fatal(err)
			}
			envs := testenvbuild.Procs(testenvBin)
			if len(envs) != 1 {
				t.Fatalf("env processes %v, want one", envs)
			}
			before := sandboxPIDs(t, rt)
			if len(before) != 1 {
				t.Fatalf("sandbox plugin processes %v, want one", before)
			}
			if err := syscall.Kill(before[0], syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			if tc.awaitRestart {
				wait.Until(t, "the sandbox plugin to be restarted", func() bool {
					now := sandboxPIDs(t, rt)
					return len(now) == 1 && now[0] != before[0]
				})
			}
			if err := syscall.Kill(envs[0], 0); err != nil {
				t.Fatalf("the env died with the plugin process: %v", err)
			}
			if err := ep.Close(ctx); err != nil {
				t.Fatalf("Close: %v", err)
			}
			if left := testenvbuild.Procs(testenvBin); len(left) > 0 {
				t.Fatalf("env processes %v survived the teardown", left)
			}
			if got := rt.Restarts(); got < tc.wantRestarted {
				t.Fatalf("plugin restarts = %d, want at least %d", got, tc.wantRestarted)
			}
			if now := sandboxPIDs(t, rt); len(now) != 1 || now[0] == before[0] {
				t.Fatalf("sandbox plugin processes %v after the teardown, want a new one (the old was %d)", now, before[0])
			}
		})
	}
}

// A reset's tool_format whose plugin exists but fails to start is refused
// with a message that shows no server path (it reaches remote clients);
// an unknown one lists the formats there are.
func TestToolFormatErrorsShowNoPaths(t *testing.T) {
	dir := t.TempDir()
	for name := range pluginSources {
		data, err := os.ReadFile(filepath.Join(pluginDir, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "agentenv-toolformat-broken"), []byte("#!/bin/sh\necho not a plugin\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg, _ := json.Marshal(map[string]string{"state_dir": t.TempDir()})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rt, err := Open(ctx, testBundle(t), Options{
		SandboxConfig: cfg, ToolFormat: "hermes",
		Plugins: pluginhost.Options{SelfExe: "/nonexistent/agentenv", SearchPath: []string{dir}, Builtins: []string{}, CachePath: "-"},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(context.Background())
	for _, tc := range []struct{ format, want string }{
		{"broken", `tool format "broken": its plugin failed to start`},
		{"hermse", "hermes"},
	} {
		_, err := rt.Engine.Play(episode.Request{TaskID: "puzzle", ToolFormat: tc.format})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("tool_format %q: %v, want %q", tc.format, err, tc.want)
		}
		if strings.Contains(err.Error(), "/") {
			t.Fatalf("tool_format %q: the error shows a path: %v", tc.format, err)
		}
	}
}
