package episode_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/agentenv/agentenv/core/episode"
)

// recorder is an Observer that keeps what it hears.
type recorder struct {
	mu    sync.Mutex
	spans []episode.Span
	ended []episode.Result
	got   chan episode.Result
}

func newRecorder() *recorder { return &recorder{got: make(chan episode.Result, 64)} }

func (r *recorder) ObserveSpan(s episode.Span) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.spans = append(r.spans, s)
}

func (r *recorder) EpisodeEnded(res episode.Result) {
	r.mu.Lock()
	r.ended = append(r.ended, res)
	r.mu.Unlock()
	r.got <- res
}

// result waits for the observer to hear the episode's final Result.
func (r *recorder) result(t *testing.T, id string) episode.Result {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case res := <-r.got:
			if res.EpisodeID == id {
				return res
			}
		case <-deadline:
			t.Fatalf("no final Result for %s", id)
		}
	}
}

func phaseCount(res episode.Result) map[episode.Phase]int {
	n := map[episode.Phase]int{}
	for _, s := range res.Spans {
		n[s.Phase]++
	}
	return n
}

// Every phase an episode goes through is timed, the final observation
// carries the times, and the observer hears each span and the Result.
func TestResultTimesEveryPhase(t *testing.T) {
	dir := bundleFiles(t, nil, map[string]string{"tasks/puzzle.json": puzzleTask(5, 2)})
	rec := newRecorder()
	r := newRig(t, dir, rigOptions{tune: func(c *episode.Config) { c.Observer, c.SandboxName = rec, "local" }})
	ep := r.play(episode.Request{TaskID: "puzzle", Queued: 250 * time.Millisecond})
	r.start(ep)
	r.step(ep, call("add", map[string]any{"n": 3}))
	obs := r.step(ep, "I reached 5.")
	if !obs.Done {
		t.Fatalf("not done: %+v", obs)
	}
	for _, p := range episode.Phases {
		if _, ok := obs.Times[string(p)]; !ok {
			t.Errorf("final observation's times lack %s: %v", p, obs.Times)
		}
	}
	if obs.Times["queue"] != 0.25 || obs.Times["deploy"] <= 0 || obs.Times["step"] <= 0 || obs.Times["tool"] <= 0 || obs.Times["teardown"] != 0 {
		t.Errorf("times = %v: want queue 0.25, deploy/step/tool > 0, teardown 0 (it runs after)", obs.Times)
	}
	if err := ep.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	res := rec.result(t, ep.ID())
	want := map[episode.Phase]int{
		episode.PhaseQueue: 1, episode.PhaseDeploy: 1, episode.PhaseReady: 1, episode.PhaseSetup: 1,
		episode.PhaseStep: 2, episode.PhaseTool: 1, episode.PhaseVerify: 1, episode.PhaseTeardown: 1,
	}
	got := phaseCount(res)
	for p, n := range want {
		if got[p] != n {
			t.Errorf("%s spans = %d, want %d (all: %v)", p, got[p], n, got)
		}
	}
	if res.Outcome != episode.OutcomeDone || res.Cause != episode.CauseCompleted || res.Source() != episode.SourceNone || !res.Closed {
		t.Errorf("result %s/%s/%s closed=%v, want done/completed/none closed", res.Outcome, res.Cause, res.Source(), res.Closed)
	}
	if res.Reward == nil || *res.Reward != 1 || res.Turns != 2 || res.Sandbox != "local" {
		t.Errorf("result reward %v turns %d sandbox %q", res.Reward, res.Turns, res.Sandbox)
	}
	for _, s := range res.Spans {
		if s.Env != "testenv" && s.Phase != episode.PhaseVerify {
			t.Errorf("span %s names env %q, want testenv", s.Phase, s.Env)
		}
		if s.Took < 0 {
			t.Errorf("span %s took %s", s.Phase, s.Took)
		}
	}
	// The observer heard each span as it ended, labelled with the sandbox.
	rec.mu.Lock()
	heard := len(rec.spans)
	for _, s := range rec.spans {
		if s.Sandbox != "local" {
			t.Errorf("observed span %s has sandbox %q", s.Phase, s.Sandbox)
		}
	}
	ended := len(rec.ended)
	rec.mu.Unlock()
	if heard != len(res.Spans) || ended != 1 {
		t.Errorf("observer heard %d spans (result has %d) and %d ends (want 1)", heard, len(res.Spans), ended)
	}
	// A second Close tells nothing again.
	_ = ep.Close(context.Background())
	if rec.mu.Lock(); len(rec.ended) != 1 {
		t.Errorf("Close twice: %d ends", len(rec.ended))
	}
	rec.mu.Unlock()
}

// How the model ended an episode is its cause, told apart from the
// infrastructure's failures and the client's leaving.
func TestResultCauses(t *testing.T) {
	twoTurns := `[
  {"id": "env", "type": "deploy_env", "env": "testenv"},
  {"id": "load", "type": "call_tool", "tool": "load_puzzle", "arguments": {"target": 3}},
  {"id": "one", "type": "prompt_agent", "prompt": "First."},
  {"id": "two", "type": "prompt_agent", "prompt": "Second."},
  {"id": "grade", "type": "verify_tool", "tool": "grade"}
]`
	dir := bundleFiles(t, nil, map[string]string{
		"tasks/puzzle.json": puzzleTask(5, 2),
		"tasks/two.json":    twoTurns,
	})
	rec := newRecorder()
	r := newRig(t, dir, rigOptions{tune: func(c *episode.Config) { c.Observer = rec }})
	add := call("add", map[string]any{"n": 1})
	tests := []struct {
		name    string
		req     episode.Request
		replies []string
		abandon episode.Cause // Abandon this, then Close, after the replies
		outcome episode.Outcome
		cause   episode.Cause
		source  episode.Source
	}{
		{"max_turns cuts it", episode.Request{TaskID: "puzzle", MaxTurns: 1}, []string{add}, "", episode.OutcomeDone, episode.CauseMaxTurns, episode.SourceModel},
		{"unreadable calls at max_turns", episode.Request{TaskID: "puzzle", MaxTurns: 1}, []string{"<tool_call>\n{\"name\": \"add\", \"arguments\": {\n</tool_call>"}, "", episode.OutcomeDone, episode.CauseUnparsedCalls, episode.SourceModel},
		{"no tool call skips a turn", episode.Request{TaskID: "two"}, []string{"just text"}, "", episode.OutcomeDone, episode.CauseNoToolCall, episode.SourceModel},
		{"end_turn twice completes", episode.Request{TaskID: "two"}, []string{call("end_turn", map[string]any{"answer": "a"}), call("end_turn", map[string]any{"answer": "b"})}, "", episode.OutcomeDone, episode.CauseCompleted, episode.SourceNone},
		{"the env crashes", episode.Request{TaskID: "puzzle"}, []string{call("crash", map[string]any{})}, "", episode.OutcomeFailed, episode.CauseEnvCrashed, episode.SourceInfrastructure},
		{"the server shuts down", episode.Request{TaskID: "puzzle"}, nil, episode.CauseServerShutdown, episode.OutcomeAbandoned, episode.CauseServerShutdown, episode.SourceInfrastructure},
		{"the client leaves", episode.Request{TaskID: "puzzle"}, []string{add}, "", episode.OutcomeAbandoned, episode.CauseClientClosed, episode.SourceClient},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ep := r.play(tc.req)
			r.start(ep)
			for _, reply := range tc.replies {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				_, _ = ep.Step(ctx, reply) // the crash fails the step: its Result says how
				cancel()
			}
			if tc.abandon != "" {
				ep.Abandon(tc.abandon)
			}
			_ = ep.Close(context.Background())
			res := rec.result(t, ep.ID())
			if res.Outcome != tc.outcome || res.Cause != tc.cause || res.Source() != tc.source {
				t.Errorf("result %s/%s/%s (error %q), want %s/%s/%s", res.Outcome, res.Cause, res.Source(), res.Error, tc.outcome, tc.cause, tc.source)
			}
		})
	}
}

// A deploy that fails is the infrastructure's doing, timed all the same.
func TestResultDeployFailed(t *testing.T) {
	dir := bundleFiles(t, nil, map[string]string{
		"envs/broken/env.toml": "command = [\"/nonexistent/env-binary\"]\n",
		"tasks/broken.json": `[
  {"id": "env", "type": "deploy_env", "env": "broken"},
  {"id": "play", "type": "prompt_agent", "prompt": "Go."},
  {"id": "ok", "type": "verify_answer", "turn": "play", "expected": "x"}
]`,
	})
	rec := newRecorder()
	r := newRig(t, dir, rigOptions{tune: func(c *episode.Config) { c.Observer = rec }})
	ep := r.play(episode.Request{TaskID: "broken"})
	if _, err := ep.Start(context.Background()); err == nil {
		t.Fatal("Start of a broken env succeeded")
	}
	_ = ep.Close(context.Background())
	res := rec.result(t, ep.ID())
	if res.Outcome != episode.OutcomeFailed || res.Cause != episode.CauseDeployFailed || res.Source() != episode.SourceInfrastructure || res.Error == "" {
		t.Errorf("result %s/%s/%s %q, want failed/deploy_failed/infrastructure with the error", res.Outcome, res.Cause, res.Source(), res.Error)
	}
	if n := phaseCount(res)[episode.PhaseDeploy]; n != 1 {
		t.Errorf("deploy spans = %d, want 1", n)
	}
}
