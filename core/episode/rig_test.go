package episode_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentenv/agentenv/sdk/sdktest/wait"

	"github.com/hashicorp/go-hclog"

	"github.com/agentenv/agentenv/core/bundle"
	"github.com/agentenv/agentenv/core/episode"
	"github.com/agentenv/agentenv/core/testenv/testenvbuild"
	"github.com/agentenv/agentenv/sdk"
	"github.com/agentenv/agentenv/sdk/reward"
	"github.com/agentenv/agentenv/sdk/sandbox"
	"github.com/agentenv/agentenv/sdk/sdktest"
	"github.com/agentenv/agentenv/sdk/toolformat"
)

// Binaries built once for the package: the test env and the plugins the
// episodes run through, as real subprocesses.
var (
	testenvBin string
	pluginBins = map[string]string{}
	stateRoot  string
)

var plugins = map[string]string{
	"sandbox-local": "../../plugins/sandbox-local/cmd/agentenv-sandbox-local",
	"reward-mean":   "../../plugins/reward-mean/cmd/agentenv-reward-mean",
	"hermes":        "../../plugins/toolformat-hermes/cmd/agentenv-toolformat-hermes",
}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "episode-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if testenvBin, err = testenvbuild.Build(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if pluginBins, err = testenvbuild.BuildCommands(dir, plugins); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	stateRoot = filepath.Join(dir, "state")
	code := m.Run()
	// The suite's promise: whatever failed, no env outlives it.
	if left := testenvbuild.Procs(testenvBin); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: env processes left behind after the suite: %v\n", left)
		for _, pid := range left {
			if p, err := os.FindProcess(pid); err == nil {
				_ = p.Kill()
			}
		}
		code = 1
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// countingDriver counts deploys and remembers live sandboxes, so tests
// can assert what an episode left behind.
type countingDriver struct {
	sandbox.Driver
	deploys atomic.Int64
	// failTerminates makes that many Terminate calls fail as a crashed
	// plugin's do, before any reaches the plugin.
	failTerminates atomic.Int64
	terminates     atomic.Int64
	// why, when set, is what Explain answers in place of the plugin
	// (sandbox-local, which has nothing to say).
	why atomic.Pointer[string]
}

func (d *countingDriver) Explain(ctx context.Context, sb sandbox.Sandbox) (string, error) {
	if w := d.why.Load(); w != nil {
		return *w, nil
	}
	return d.Driver.(sandbox.Explainer).Explain(ctx, sb)
}

func (d *countingDriver) Terminate(ctx context.Context, sb sandbox.Sandbox) error {
	d.terminates.Add(1)
	if d.failTerminates.Add(-1) >= 0 {
		return errors.New("plugin sandbox-local: plugin process crashed")
	}
	return d.Driver.Terminate(ctx, sb)
}

func (d *countingDriver) Deploy(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	d.deploys.Add(1)
	return d.Driver.Deploy(ctx, spec)
}

// rig is an engine over a bundle, with the sandbox and reward plugins
// running as subprocesses.
type rig struct {
	t      testing.TB
	engine *episode.Engine
	driver *countingDriver
	bundle *bundle.Bundle
}

type rigOptions struct {
	reward     bool   // combine with reward-mean
	rewardStep string // --reward score:<id>
	tune       func(*episode.Config)
}

func newRig(t testing.TB, dir string, opts rigOptions) *rig {
	t.Helper()
	b, err := bundle.Load(dir, bundle.Options{})
	if err != nil {
		t.Fatalf("loading test bundle: %v", err)
	}
	sb := sdktest.Launch(t, sdk.KindSandbox, pluginBins["sandbox-local"]).(*sandbox.Client)
	stateDir := filepath.Join(stateRoot, strings.ReplaceAll(t.Name(), "/", "_"))
	cfg, _ := json.Marshal(map[string]string{"state_dir": stateDir, "grace": "1s"})
	if err := sb.Configure(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	driver := &countingDriver{Driver: sb}
	c := episode.Config{
		Bundle:     b,
		Sandbox:    driver,
		ToolFormat: toolFormats(t),

		DefaultToolFormat: "hermes",
		RewardStep:        opts.rewardStep,
		Labels:            map[string]string{"agentenv.instance": "episode-test"},
		Logger:            hclog.New(&hclog.LoggerOptions{Level: hclog.Warn, Output: os.Stderr}),
		DeployTimeout:     20 * time.Second,
		ToolCallTimeout:   5 * time.Second,
		VerifyTimeout:     5 * time.Second,
		TeardownTimeout:   10 * time.Second,
	}
	if opts.reward {
		c.Reward = sdktest.Launch(t, sdk.KindReward, pluginBins["reward-mean"]).(reward.Combiner)
	}
	if opts.tune != nil {
		opts.tune(&c)
	}
	e, err := episode.NewEngine(c)
	if err != nil {
		t.Fatalf("NewEngine: %v", err)
	}
	r := &rig{t: t, engine: e, driver: driver, bundle: b}
	t.Cleanup(func() {
		r.assertNothingLive()
		// Before the plugin is stopped: a plugin killed while it still
		// undoes a cut-short deploy would leave that env to the next start.
		waitEnvsGone(t)
	})
	return r
}

// waitEnvsGone waits until no env process of the suite runs. A deploy the episode gave up on (its
// context ended) is still being undone in the sandbox plugin when the
// host's call returns: the plugin stops the env it started once it sees the
// cancel, which a loaded machine can delay.
func waitEnvsGone(t testing.TB) {
	t.Helper()
	// No event says another process's child ended: poll.
	wait.For(t, "no env process left", func() error {
		if left := testenvbuild.Procs(testenvBin); len(left) > 0 {
			return fmt.Errorf("env processes left: %v", left)
		}
		return nil
	})
}

// assertNothingLive checks the sandbox lists no sandbox of this test.
func (r *rig) assertNothingLive() {
	r.t.Helper()
	// Teardown runs in the background (the final observation does not wait
	// for it); the engine's teardowns end within their timeout.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := r.engine.Idle(ctx); err != nil {
		r.t.Errorf("teardowns still running: %v", err)
	}
	live, err := r.driver.List(context.Background(), map[string]string{"agentenv.instance": "episode-test"})
	if err != nil {
		r.t.Errorf("List: %v", err)
		return
	}
	for _, sb := range live {
		r.t.Errorf("sandbox %s (episode %s) still live after the test", sb.ID, sb.Labels["agentenv.episode"])
		_ = r.driver.Terminate(context.Background(), sb)
	}
}

// play starts an episode of task.
func (r *rig) play(req episode.Request) episode.Episode {
	r.t.Helper()
	ep, err := r.engine.Play(req)
	if err != nil {
		r.t.Fatalf("Play(%+v): %v", req, err)
	}
	r.t.Cleanup(func() { _ = ep.Close(context.Background()) })
	return ep
}

func (r *rig) start(ep episode.Episode) episode.Observation {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	obs, err := ep.Start(ctx)
	if err != nil {
		r.t.Fatalf("Start: %v", err)
	}
	return obs
}

func (r *rig) step(ep episode.Episode, reply string) episode.Observation {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	obs, err := ep.Step(ctx, reply)
	if err != nil {
		r.t.Fatalf("Step(%q): %v", reply, err)
	}
	return obs
}

// call writes one hermes tool call.
func call(name string, args any) string {
	b, _ := json.Marshal(map[string]any{"name": name, "arguments": args})
	return "<tool_call>\n" + string(b) + "\n</tool_call>"
}

// bundleFiles writes a bundle whose env "testenv" runs the test env with
// vars, plus files (path → content), and returns its folder.
func bundleFiles(t testing.TB, vars map[string]string, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	env := fmt.Sprintf("command = [%q]\n", testenvBin)
	if len(vars) > 0 {
		var kv []string
		for k, v := range vars {
			kv = append(kv, fmt.Sprintf("%s = %q", k, v))
		}
		env += "env = { " + strings.Join(kv, ", ") + " }\n"
	}
	all := map[string]string{
		"README.md":             "A test bundle for the episode engine.\n",
		"envs/testenv/env.toml": env,
	}
	for k, v := range files {
		all[k] = v
	}
	for path, content := range all {
		full := filepath.Join(dir, path)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// puzzleTask is a single-turn task: reach target from start; graded by the env.
func puzzleTask(target, start int, extra ...string) string {
	steps := []string{
		`{"id": "env", "type": "deploy_env", "env": "testenv"}`,
		fmt.Sprintf(`{"id": "load", "type": "call_tool", "tool": "load_puzzle", "arguments": {"target": %d, "start": %d}}`, target, start),
		`{"id": "play", "type": "prompt_agent", "system_prompt": "You play a number puzzle.", "prompt": "Reach the target."}`,
	}
	steps = append(steps, extra...)
	if len(extra) == 0 {
		steps = append(steps, `{"id": "grade", "type": "verify_tool", "tool": "grade"}`)
	}
	return "[\n  " + strings.Join(steps, ",\n  ") + "\n]\n"
}

// toolFormats serves hermes from its plugin binary, launched on first use.
func toolFormats(t testing.TB) func(string) (toolformat.Parser, error) {
	var once sync.Once
	var hermes *toolformat.Client
	return func(name string) (toolformat.Parser, error) {
		if name != "hermes" {
			return nil, fmt.Errorf("no tool format %q (have: hermes)", name)
		}
		once.Do(func() { hermes = sdktest.Launch(t, sdk.KindToolFormat, pluginBins["hermes"]).(*toolformat.Client) })
		return hermes, nil
	}
}
