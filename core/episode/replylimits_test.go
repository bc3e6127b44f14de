package episode_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/agentenv/agentenv/core/episode"
)

// A flood of bad calls in one reply is answered with at most
// MaxReplyErrors errors and one line counting the rest; every call is
// still counted in the metrics.
func TestReplyErrorsAreCapped(t *testing.T) {
	dir := bundleFiles(t, nil, map[string]string{"tasks/puzzle.json": puzzleTask(5, 2)})
	r := newRig(t, dir, rigOptions{})
	ep := r.play(episode.Request{TaskID: "puzzle"})
	r.start(ep)
	reply := strings.Repeat("<tool_call>x</tool_call>", 100) + strings.Repeat(call("add", map[string]any{"n": "x"}), 50)
	obs := r.step(ep, reply)
	msgs := contents(obs.Messages)
	if len(msgs) != episode.DefaultMaxReplyErrors+1 {
		t.Fatalf("%d messages answer 150 bad calls, want %d errors and a count", len(msgs), episode.DefaultMaxReplyErrors)
	}
	last := msgs[len(msgs)-1]
	if !strings.Contains(last, "130 more tool calls in this reply failed") {
		t.Errorf("last message %q should count the 130 errors left out", last)
	}
	obs = r.step(ep, call("add", map[string]any{"n": 3}))
	if got := contents(obs.Messages); len(got) != 1 || got[0] != "tool: 5" {
		t.Fatalf("the episode should go on after the flood: %q", got)
	}
	obs = r.step(ep, "Done.")
	want := map[string]float64{"unparsed_calls": 100, "invalid_calls": 50, "tool_calls": 51, "score/grade": 1}
	for k, v := range want {
		if obs.Metrics[k] != v {
			t.Errorf("metric %s = %v, want %v", k, obs.Metrics[k], v)
		}
	}
}

// Calls past MaxCallsPerReply are not run, and the model is told.
func TestCallsPerReplyAreCapped(t *testing.T) {
	dir := bundleFiles(t, nil, map[string]string{"tasks/puzzle.json": puzzleTask(500, 0)})
	r := newRig(t, dir, rigOptions{})
	ep := r.play(episode.Request{TaskID: "puzzle"})
	r.start(ep)
	n := episode.DefaultMaxCallsPerReply + 6
	obs := r.step(ep, strings.Repeat(call("add", map[string]any{"n": 1}), n))
	msgs := contents(obs.Messages)
	if len(msgs) != n {
		t.Fatalf("%d messages for %d calls", len(msgs), n)
	}
	if want := "tool: 64"; msgs[episode.DefaultMaxCallsPerReply-1] != want {
		t.Errorf("call %d answered %q, want %q", episode.DefaultMaxCallsPerReply, msgs[episode.DefaultMaxCallsPerReply-1], want)
	}
	if got := msgs[episode.DefaultMaxCallsPerReply]; !strings.Contains(got, "add was not run: a reply may make at most 64 tool calls") {
		t.Errorf("call %d answered %q, want it not run", episode.DefaultMaxCallsPerReply+1, got)
	}
}

// Arguments past MaxArgumentValues are refused with one short error,
// before any decoding or schema check.
func TestHugeArgumentsAreRefusedUnread(t *testing.T) {
	dir := bundleFiles(t, nil, map[string]string{"tasks/puzzle.json": puzzleTask(5, 2)})
	r := newRig(t, dir, rigOptions{})
	ep := r.play(episode.Request{TaskID: "puzzle"})
	r.start(ep)
	items := strings.Repeat(`"x",`, episode.DefaultMaxArgumentValues) + `"x"`
	obs := r.step(ep, call("add", map[string]any{"n": json.RawMessage("[" + items + "]")}))
	msgs := contents(obs.Messages)
	if len(msgs) != 1 || !strings.Contains(msgs[0], "more than 20000 JSON values") || len(msgs[0]) > 500 {
		t.Fatalf("answer to a 20001-item argument: %.300q (%d messages)", msgs, len(msgs))
	}
}

// A reply of ~15 MiB of malformed blocks, under the server's 16 MiB frame
// limit, is answered (its errors capped and counted), not failed: the
// tool-format plugin's answer would otherwise outgrow the plugin message
// limit several times.
func TestMalformedFloodUnderFrameLimit(t *testing.T) {
	dir := bundleFiles(t, nil, map[string]string{"tasks/puzzle.json": puzzleTask(5, 2)})
	r := newRig(t, dir, rigOptions{})
	ep := r.play(episode.Request{TaskID: "puzzle"})
	r.start(ep)
	const blocks = 650_000
	obs, err := ep.Step(context.Background(), strings.Repeat("<tool_call>x</tool_call>", blocks))
	if err != nil {
		t.Fatalf("a 15 MiB reply of malformed blocks failed the episode: %.300v", err)
	}
	msgs := contents(obs.Messages)
	if len(msgs) != episode.DefaultMaxReplyErrors+1 || !strings.Contains(msgs[len(msgs)-1], fmt.Sprintf("%d more tool calls", blocks-episode.DefaultMaxReplyErrors)) {
		t.Fatalf("%d messages, last %q", len(msgs), msgs[len(msgs)-1])
	}
	obs = r.step(ep, call("add", map[string]any{"n": 3}))
	obs = r.step(ep, "Done.")
	if !obs.Done || obs.Metrics["unparsed_calls"] != blocks {
		t.Fatalf("final: done %v, unparsed_calls %v", obs.Done, obs.Metrics["unparsed_calls"])
	}
}
