package episode_test

import (
	"testing"

	"github.com/agentenv/agentenv/core/episode"
)

// A turn that max_turns kept from opening has no answer: verify_answer
// must score it 0 even when its pattern accepts the empty string.
func TestVerifyAnswerOnTurnThatNeverRan(t *testing.T) {
	task := `[
  {"id": "env", "type": "deploy_env", "env": "testenv"},
  {"id": "load", "type": "call_tool", "tool": "load_puzzle", "arguments": {"target": 3}},
  {"id": "one", "type": "prompt_agent", "prompt": "First."},
  {"id": "two", "type": "prompt_agent", "prompt": "Second: how many steps?"},
  {"id": "ans", "type": "verify_answer", "turn": "two", "pattern": "^[0-9]*$"}
]`
	dir := bundleFiles(t, nil, map[string]string{"tasks/capped.json": task})
	r := newRig(t, dir, rigOptions{})
	for _, tc := range []struct {
		name     string
		maxTurns int
		replies  []string
		want     float64
	}{
		{"turn two capped away", 1, []string{call("add", map[string]any{"n": 1})}, 0},
		{"turn two answered", 0, []string{call("end_turn", map[string]any{"answer": "x"}), call("end_turn", map[string]any{"answer": "7"})}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ep := r.play(episode.Request{TaskID: "capped", MaxTurns: tc.maxTurns})
			r.start(ep)
			var obs episode.Observation
			for _, reply := range tc.replies {
				obs = r.step(ep, reply)
			}
			if !obs.Done || obs.Metrics["score/ans"] != tc.want || *obs.Reward != tc.want {
				t.Fatalf("want score/ans %v: %+v", tc.want, obs)
			}
		})
	}
}
