package episode_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentenv/agentenv/sdk/sdktest/wait"

	"github.com/agentenv/agentenv/core/bundle"
	"github.com/agentenv/agentenv/core/episode"
	"github.com/agentenv/agentenv/core/testenv/testenvbuild"
	"github.com/agentenv/agentenv/core/threadlimit"
	"github.com/agentenv/agentenv/sdk/sandbox"
)

func mustLoad(t *testing.T, dir string) *bundle.Bundle {
	t.Helper()
	b, err := bundle.Load(dir, bundle.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// nopDriver is a sandbox that is never reached (engine construction tests).
type nopDriver struct{}

func (nopDriver) Deploy(context.Context, sandbox.Spec) (sandbox.Sandbox, error) {
	return sandbox.Sandbox{}, errors.New("nopDriver")
}
func (nopDriver) Terminate(context.Context, sandbox.Sandbox) error { return nil }
func (nopDriver) List(context.Context, map[string]string) ([]sandbox.Sandbox, error) {
	return nil, nil
}
func (nopDriver) Exec(context.Context, sandbox.Sandbox, []string) (sandbox.ExecResult, error) {
	return sandbox.ExecResult{}, sandbox.ErrExecUnsupported
}

// assertGone fails the test if any env process or sandbox is left.
func assertGone(t *testing.T, r *rig) {
	t.Helper()
	r.assertNothingLive()
	waitEnvsGone(t)
}

func TestFailuresTearDown(t *testing.T) {
	sleepCall := call("sleep", map[string]any{"seconds": 30})
	tests := []struct {
		name  string
		vars  map[string]string
		task  string
		tune  func(*episode.Config)
		play  func(t *testing.T, r *rig, ep episode.Episode) error
		code  episode.Code
		wants []string
		// brief is what a remote client is told (Error.Brief), when it is
		// not the whole error: never the env's address.
		brief []string
	}{
		{
			name: "env fails to start", vars: map[string]string{"TESTENV_FAIL_START": "1"},
			play: func(t *testing.T, r *rig, ep episode.Episode) error {
				_, err := ep.Start(context.Background())
				return err
			},
			code: episode.CodeDeploy, wants: []string{`deploy_env step "env"`, "failing to start as asked"},
		},
		{
			name: "env never answers", vars: map[string]string{"TESTENV_START_DELAY": "1m"},
			tune: func(c *episode.Config) { c.DeployTimeout = 700 * time.Millisecond },
			play: func(t *testing.T, r *rig, ep episode.Episode) error {
				_, err := ep.Start(context.Background())
				return err
			},
			code: episode.CodeDeploy, wants: []string{`deploying env "testenv": not ready within 700ms`},
		},
		{
			name: "setup tool fails",
			task: `[{"id": "env", "type": "deploy_env", "env": "testenv"},
			        {"id": "load", "type": "call_tool", "tool": "load_puzzle", "arguments": {"target": "high"}},
			        {"id": "play", "type": "prompt_agent", "prompt": "Go."},
			        {"id": "grade", "type": "verify_tool", "tool": "grade"}]`,
			play: func(t *testing.T, r *rig, ep episode.Episode) error {
				_, err := ep.Start(context.Background())
				return err
			},
			code: episode.CodeDeploy, wants: []string{`call_tool step "load"`, "load_puzzle", "answered with an error"},
		},
		{
			name: "a turn offers a tool the env lacks",
			task: `[{"id": "env", "type": "deploy_env", "env": "testenv"},
			        {"id": "play", "type": "prompt_agent", "prompt": "Go.", "tools": ["add", "teleport"]},
			        {"id": "grade", "type": "verify_tool", "tool": "grade"}]`,
			play: func(t *testing.T, r *rig, ep episode.Episode) error {
				_, err := ep.Start(context.Background())
				return err
			},
			code: episode.CodeDeploy, wants: []string{`prompt_agent step "play"`, `tool "teleport" is not served by env testenv`},
		},
		{
			name: "env crashes mid-episode (its child dies too)", vars: map[string]string{"TESTENV_CHILD": "1"},
			play: func(t *testing.T, r *rig, ep episode.Episode) error {
				r.start(ep)
				r.step(ep, call("add", map[string]any{"n": 1}))
				_, err := ep.Step(context.Background(), call("crash", map[string]any{}))
				return err
			},
			code: episode.CodeExecution, wants: []string{`env "testenv"`, "calling crash"},
			brief: []string{`env "testenv" (sandbox local-`, `): the call of crash got no answer: the env closed the connection`},
		},
		{
			name: "env crashes mid-episode, and the sandbox says why", vars: map[string]string{"TESTENV_CHILD": "1"},
			play: func(t *testing.T, r *rig, ep episode.Episode) error {
				r.start(ep)
				why := "its pod envs/p-1 (node n2) was evicted; node n2 is cordoned"
				r.driver.why.Store(&why)
				_, err := ep.Step(context.Background(), call("crash", map[string]any{}))
				return err
			},
			code: episode.CodeExecution, wants: []string{"calling crash", "; the sandbox says: its pod envs/p-1 (node n2) was evicted; node n2 is cordoned"},
			brief: []string{`): the call of crash got no answer: the env closed the connection`,
				"; the sandbox says: its pod envs/p-1 (node n2) was evicted; node n2 is cordoned"},
		},
		{
			name: "tool call past its deadline",
			tune: func(c *episode.Config) { c.ToolCallTimeout = 500 * time.Millisecond },
			play: func(t *testing.T, r *rig, ep episode.Episode) error {
				r.start(ep)
				_, err := ep.Step(context.Background(), sleepCall)
				return err
			},
			code: episode.CodeExecution, wants: []string{"calling sleep", "no answer within 500ms"},
			brief: []string{`env "testenv" (sandbox local-`, `): the call of sleep got no answer: it did not answer in time`},
		},
		{
			name: "grading tool errors", vars: map[string]string{"TESTENV_GRADE_ERROR": "1"},
			play: func(t *testing.T, r *rig, ep episode.Episode) error {
				r.start(ep)
				_, err := ep.Step(context.Background(), "done")
				return err
			},
			code: episode.CodeUnscored, wants: []string{`verify_tool step "grade"`, "grader broke"},
		},
		{
			name: "grading tool answers no number", vars: map[string]string{"TESTENV_GRADE_TEXT": "great job"},
			play: func(t *testing.T, r *rig, ep episode.Episode) error {
				r.start(ep)
				_, err := ep.Step(context.Background(), "done")
				return err
			},
			code: episode.CodeUnscored, wants: []string{`answered "great job", not a number`},
		},
		{
			name: "verify_command cannot run",
			task: puzzleTask(5, 2, `{"id": "cmd", "type": "verify_command", "command": ["no-such-checker-xyz"]}`),
			play: func(t *testing.T, r *rig, ep episode.Episode) error {
				r.start(ep)
				_, err := ep.Step(context.Background(), "done")
				return err
			},
			code: episode.CodeUnscored, wants: []string{`verify_command step "cmd"`, "no-such-checker-xyz"},
		},
		{
			name: "context cancelled during a tool call",
			play: func(t *testing.T, r *rig, ep episode.Episode) error {
				r.start(ep)
				ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
				defer cancel()
				_, err := ep.Step(ctx, sleepCall)
				return err
			},
			code: episode.CodeExecution, wants: []string{"calling sleep"}, brief: []string{"the call of sleep got no answer"},
		},
		{
			name: "context cancelled during Start", vars: map[string]string{"TESTENV_START_DELAY": "1m"},
			play: func(t *testing.T, r *rig, ep episode.Episode) error {
				ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
				defer cancel()
				_, err := ep.Start(ctx)
				return err
			},
			code: episode.CodeDeploy, wants: []string{"deadline exceeded"},
		},
		{
			name: "Close during Start", vars: map[string]string{"TESTENV_START_DELAY": "1m"},
			play: func(t *testing.T, r *rig, ep episode.Episode) error {
				started := make(chan error, 1)
				go func() { _, err := ep.Start(context.Background()); started <- err }()
				// Once the deploy began (the env then waits a minute).
				wait.Until(t, "the deploy to begin", func() bool { return r.driver.deploys.Load() > 0 })
				_ = ep.Close(context.Background())
				return <-started
			},
			code: episode.CodeDeploy, wants: []string{"canceled"},
		},
		{
			name: "Close during Step",
			play: func(t *testing.T, r *rig, ep episode.Episode) error {
				r.start(ep)
				go func() {
					// Room for the step to reach the env's 30 s sleep; no
					// event says it did, and a Close first fails the step
					// the same way, so load cannot fail the test.
					time.Sleep(400 * time.Millisecond)
					_ = ep.Close(context.Background())
				}()
				_, err := ep.Step(context.Background(), sleepCall)
				return err
			},
			code: episode.CodeExecution, wants: []string{"calling sleep"}, brief: []string{"the call of sleep got no answer: the call was cancelled"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			task := tc.task
			if task == "" {
				task = puzzleTask(5, 2)
			}
			dir := bundleFiles(t, tc.vars, map[string]string{"tasks/puzzle.json": task})
			r := newRig(t, dir, rigOptions{tune: tc.tune})
			ep, err := r.engine.Play(episode.Request{TaskID: "puzzle"})
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			err = tc.play(t, r, ep)
			if err == nil {
				t.Fatal("the episode did not fail")
			}
			if got := episode.CodeOf(err); got != tc.code {
				t.Errorf("code %s, want %s (%v)", got, tc.code, err)
			}
			for _, w := range tc.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			var epErr *episode.Error
			if !errors.As(err, &epErr) {
				t.Fatalf("%T is no *episode.Error", err)
			}
			brief, ok := epErr.Brief()
			if ok != (tc.brief != nil || tc.code == episode.CodeDeploy) {
				t.Errorf("Brief() = %q, %v", brief, ok)
			}
			for _, w := range tc.brief {
				if !strings.Contains(brief, w) {
					t.Errorf("brief %q does not say %q", brief, w)
				}
			}
			// sandbox-local has nothing to say (its Explain, over gRPC, is "").
			if !strings.Contains(strings.Join(tc.brief, " "), "the sandbox says") && strings.Contains(brief, "the sandbox says") {
				t.Errorf("brief %q: the sandbox said something it does not know", brief)
			}
			if strings.Contains(brief, "127.0.0.1") || strings.Contains(brief, "/mcp") {
				t.Errorf("brief %q shows the env's address", brief)
			}
			if d := time.Since(start); d > 20*time.Second {
				t.Errorf("failing took %s", d)
			}
			// Torn down by the engine, before Close.
			assertGone(t, r)
			if _, err := ep.Step(context.Background(), "again"); err == nil {
				t.Error("Step after a failure succeeded")
			}
			if err := ep.Close(context.Background()); err != nil {
				t.Errorf("Close: %v", err)
			}
			if err := ep.Close(context.Background()); err != nil {
				t.Errorf("second Close: %v", err)
			}
		})
	}
}

func TestCloseMidEpisode(t *testing.T) {
	dir := bundleFiles(t, map[string]string{"TESTENV_CHILD": "1"}, map[string]string{"tasks/puzzle.json": puzzleTask(5, 2)})
	r := newRig(t, dir, rigOptions{})
	ep := r.play(episode.Request{TaskID: "puzzle"})
	r.start(ep)
	r.step(ep, call("add", map[string]any{"n": 1}))
	if len(testenvbuild.Procs(testenvBin)) != 2 {
		t.Fatalf("want the env and its child running, have %v", testenvbuild.Procs(testenvBin))
	}
	if err := ep.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	assertGone(t, r)
	if _, err := ep.Step(context.Background(), "x"); episode.CodeOf(err) != episode.CodeValidation {
		t.Fatalf("Step after Close = %v", err)
	}
	if _, err := ep.Start(context.Background()); err == nil {
		t.Fatal("Start after Close succeeded")
	}
}

func TestEngineCloseTearsDownLiveEpisodes(t *testing.T) {
	dir := bundleFiles(t, nil, map[string]string{"tasks/puzzle.json": puzzleTask(5, 2)})
	r := newRig(t, dir, rigOptions{})
	var eps []episode.Episode
	for range 3 {
		ep := r.play(episode.Request{TaskID: "puzzle"})
		r.start(ep)
		eps = append(eps, ep)
	}
	// One still in flight: a tool call that hangs.
	stepErr := make(chan error, 1)
	go func() {
		_, err := eps[0].Step(context.Background(), call("sleep", map[string]any{"seconds": 30}))
		stepErr <- err
	}()
	// Room for the step to reach the env; a Close first fails it all the
	// same, so the window only makes the test sharper.
	time.Sleep(300 * time.Millisecond)
	if err := r.engine.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-stepErr; err == nil {
		t.Fatal("the step in flight succeeded after Close")
	}
	assertGone(t, r)
	if _, err := r.engine.Play(episode.Request{TaskID: "puzzle"}); err == nil || !strings.Contains(err.Error(), "shutting down") {
		t.Fatalf("Play after Close = %v", err)
	}
}

// A toolset whose listing fails is not deployed again on every catalogue
// request: after three failures in a row the failure is answered from
// memory for ToolsetRetryAfter, then the next request tries afresh.
func TestFailedToolsetListingIsRemembered(t *testing.T) {
	dir := bundleFiles(t, map[string]string{"TESTENV_FAIL_START": "1"}, map[string]string{"tasks/puzzle.json": puzzleTask(5, 2)})
	for _, tc := range []struct {
		name        string
		retryAfter  time.Duration
		gets, wants int64
	}{
		{"within the retry interval", 0 /* the default, 30s */, 10, 3},
		{"past it", time.Nanosecond, 5, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, dir, rigOptions{tune: func(c *episode.Config) { c.ToolsetRetryAfter = tc.retryAfter }})
			ts := r.bundle.Toolsets()[0]
			for i := range tc.gets {
				_, err := r.engine.Tools(context.Background(), ts.ID)
				if episode.CodeOf(err) != episode.CodeDeploy {
					t.Fatalf("listing %d: %v, want a deploy failure", i, err)
				}
				if i >= 3 && tc.retryAfter == 0 && !strings.Contains(err.Error(), "tried again in") {
					t.Errorf("a remembered failure does not say when it is tried again: %v", err)
				}
			}
			if n := r.driver.deploys.Load(); n != tc.wants {
				t.Fatalf("%d listings deployed %d times, want %d", tc.gets, n, tc.wants)
			}
		})
	}
}

// A deploy or env call that fails while the machine is out of threads
// names that as the cause, to the log and to the client (127 steps failed
// as a bare EXECUTION_ERROR when 3,000 live envs ran a 16-core machine
// into kernel.pid_max).
func TestFailuresNameThreadExhaustion(t *testing.T) {
	pidMax := threadlimit.Limit{Name: "kernel.pid_max", Max: 32768, Used: 32750, Raise: "sysctl -w kernel.pid_max=4194304"}
	for _, tc := range []struct {
		name string
		vars map[string]string
	}{
		{"deploy", map[string]string{"TESTENV_FAIL_START": "1"}},
		{"env call", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, bundleFiles(t, tc.vars, map[string]string{"tasks/puzzle.json": puzzleTask(5, 2)}), rigOptions{})
			ep, err := r.engine.Play(episode.Request{TaskID: "puzzle"})
			if err != nil {
				t.Fatal(err)
			}
			// Set once the deploy is under way: the env's own start (in
			// the "env call" case) must not see it.
			var out bool
			defer episode.SetExhaustedThreads(func() (threadlimit.Limit, bool) { return pidMax, out })()
			if tc.name == "env call" {
				r.start(ep)
				out = true
				_, err = ep.Step(context.Background(), call("crash", map[string]any{}))
			} else {
				out = true
				_, err = ep.Start(context.Background())
			}
			var epErr *episode.Error
			if !errors.As(err, &epErr) {
				t.Fatalf("err %v", err)
			}
			brief, _ := epErr.Brief()
			for what, msg := range map[string]string{"error": err.Error(), "brief": brief} {
				if strings.Count(msg, "the machine is out of threads: 32750 in use, kernel.pid_max is 32768 (raise it: sysctl -w kernel.pid_max=4194304") != 1 {
					t.Errorf("%s %q does not name the cause once", what, msg)
				}
			}
		})
	}
}
