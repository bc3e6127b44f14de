package episode_test

import (
	"bytes"
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

// A call's arguments reach the env as the model wrote them: numbers keep
// their spelling (integers past int64 and float64's precision, long
// decimals, exponents), strings their escapes and characters, objects
// their key order; only the whitespace between tokens goes. The schema is
// still checked on the way.
func TestArgumentsReachTheEnvAsWritten(t *testing.T) {
	dir := bundleFiles(t, map[string]string{"TESTENV_ECHO_ARGS": "1"}, map[string]string{"tasks/puzzle.json": puzzleTask(5, 2)})
	r := newRig(t, dir, rigOptions{})
	ep := r.play(episode.Request{TaskID: "puzzle"})
	r.start(ep)
	for _, args := range []string{
		`{"z": 1, "a": 2, "m": {"y": [3, 2, 1], "b": null}}`,
		`{"big": 123456789012345678901234567890, "neg": -98765432109876543210, "n": 9007199254740993}`,
		`{"dec": 0.1000000000000000055511151231257827, "exp": 1E+308, "tiny": 4.9e-324, "negzero": -0.0, "n": 1.50}`,
		`{"s": "caf\u00e9 café \ud83d\ude00 😀 <&> \"q\" \\ \/ \t", "ß": "\u0000"}`,
		`{}`,
	} {
		obs := r.step(ep, "<tool_call>\n{\"name\": \"echo_args\", \"arguments\": "+args+"}\n</tool_call>")
		var want bytes.Buffer
		if err := json.Compact(&want, []byte(args)); err != nil {
			t.Fatal(err)
		}
		if len(obs.Messages) != 1 || obs.Messages[0].Content != want.String() {
			t.Fatalf("the env got\n%+v\nwant\n%s", obs.Messages, want.String())
		}
	}
	// The schema is checked before the call, as before: n must be a number.
	obs := r.step(ep, "<tool_call>\n{\"name\": \"echo_args\", \"arguments\": {\"n\": \"1\"}}\n</tool_call>")
	if len(obs.Messages) != 1 || !strings.HasPrefix(obs.Messages[0].Content, "Error: invalid arguments for echo_args") {
		t.Fatalf("a schema failure: %+v", obs.Messages)
	}
	// And a number past float64 is still refused, never sent: no env
	// could read it (hermes refuses 1e400 itself; TestOddArgumentsAreAnswered
	// has the engine refuse one the format lets through).
	obs = r.step(ep, "<tool_call>\n{\"name\": \"echo_args\", \"arguments\": {\"x\": 1e400}}\n</tool_call>")
	if len(obs.Messages) != 1 || !strings.HasPrefix(obs.Messages[0].Content, "Error: ") || !strings.Contains(obs.Messages[0].Content, "1e400, too large for a double") {
		t.Fatalf("1e400: %+v", obs.Messages)
	}
}
