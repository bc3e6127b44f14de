package episode_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentenv/agentenv/core/episode"
)

// Arguments the model writes that pass the tool's schema but cannot be
// sent as they are (an integer past float64; the tool format reads it,
// vLLM does too) are answered and counted as
// invalid, not allowed to fail the episode.
func TestOddArgumentsAreAnswered(t *testing.T) {
	dir := bundleFiles(t, nil, map[string]string{"tasks/puzzle.json": puzzleTask(5, 2)})
	r := newRig(t, dir, rigOptions{})
	ep := r.play(episode.Request{TaskID: "puzzle"})
	r.start(ep)
	obs, err := ep.Step(context.Background(), call("add", map[string]any{"n": json.RawMessage("1" + strings.Repeat("0", 400))}))
	if err != nil {
		t.Fatalf("Step: %v", err)
	}
	if len(obs.Messages) != 1 || !strings.HasPrefix(obs.Messages[0].Content, "Error: invalid arguments for add") {
		t.Fatalf("answer: %+v", obs.Messages)
	}
	obs = r.step(ep, call("add", map[string]any{"n": 3}))
	obs = r.step(ep, "done")
	if !obs.Done || *obs.Reward != 1 || obs.Metrics["invalid_calls"] != 1 {
		t.Fatalf("final: %+v", obs)
	}
}
