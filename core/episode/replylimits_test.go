package episode_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentenv/agentenv/core/bundle"
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

// An env's tool results are bounded per call and per reply, counted as
// the server sends them (JSON-encoded): a result past its room is cut on
// a character boundary and ends with a line telling the model so, later
// results of a reply share what is left, and the episode goes on.
func TestToolResultsAreCapped(t *testing.T) {
	const perCall, perReply = 1 << 20, 3 << 20
	dir := bundleFiles(t, nil, map[string]string{"tasks/puzzle.json": puzzleTask(5, 2)})
	r := newRig(t, dir, rigOptions{tune: func(c *episode.Config) {
		c.Limits.MaxResultBytes, c.Limits.MaxReplyResultBytes = perCall, perReply
		c.ToolCallTimeout = time.Minute // the env writes 16 MiB on a busy machine
	}})
	ep := r.play(episode.Request{TaskID: "puzzle"})
	r.start(ep)
	flood := func(bytes int, char string) string {
		return call("flood", map[string]any{"bytes": bytes, "char": char})
	}
	sent := func(msgs []episode.Message) (n int) {
		for _, m := range msgs {
			b, _ := json.Marshal(m.Content)
			n += len(b)
		}
		return n
	}
	tests := []struct {
		name    string
		reply   string
		results int // messages expected
		cut     int // of them, cut
	}{
		{"one result far over its cap", flood(16<<20, "x"), 1, 1},
		{"characters that encode to six bytes", flood(2<<20, "<"), 1, 1},
		{"five results share the reply's room", strings.Repeat(flood(2<<20, "y"), 5), 5, 5},
		{"results under the caps are whole", strings.Repeat(flood(1000, "z"), 3), 3, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			obs := r.step(ep, tc.reply)
			if len(obs.Messages) != tc.results {
				t.Fatalf("%d messages, want %d", len(obs.Messages), tc.results)
			}
			cut := 0
			for _, m := range obs.Messages {
				if strings.Contains(m.Content, "[agentenv: the tool's result was cut here") {
					cut++
				}
			}
			if cut != tc.cut {
				t.Errorf("%d results say they were cut, want %d", cut, tc.cut)
			}
			if n := sent(obs.Messages); n > perReply+tc.results*400 {
				t.Errorf("the results take %d bytes as sent, over the reply's %d", n, perReply)
			}
			if n, _ := json.Marshal(obs.Messages[0].Content); len(n) > perCall+400 {
				t.Errorf("one result takes %d bytes as sent, over the call's %d", len(n), perCall)
			}
		})
	}
	obs := r.step(ep, call("add", map[string]any{"n": 3}))
	if got := contents(obs.Messages); len(got) != 1 || got[0] != "tool: 5" {
		t.Fatalf("the episode should go on: %q", got)
	}
}

// Limits a client could not be answered within are refused at start.
func TestReplyResultCapIsBounded(t *testing.T) {
	dir := bundleFiles(t, nil, map[string]string{"tasks/puzzle.json": puzzleTask(5, 2)})
	b, err := bundle.Load(dir, bundle.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = episode.NewEngine(episode.Config{Bundle: b, Sandbox: nopDriver{}, ToolFormat: toolFormats(t),
		Limits: episode.Limits{MaxReplyResultBytes: episode.MaxReplyResultBytesCap + 1}})
	if err == nil || !strings.Contains(err.Error(), "64 MiB frame") {
		t.Fatalf("NewEngine = %v, want a refusal naming the frame limit", err)
	}
}

// The SkyRL client's frame limit is the one the engine's reply bound is
// sized for: a frame past the client's kills its session (close 1006).
func TestClientFrameLimitMatchesTheSkyRLClient(t *testing.T) {
	src, err := os.ReadFile("../../integrations/episode/agentenv_episode/session.py")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^_MAX_FRAME = (\d+) << 20$`).FindSubmatch(src)
	if m == nil {
		t.Fatal("session.py has no line _MAX_FRAME = N << 20")
	}
	if mib, _ := strconv.Atoi(string(m[1])); mib<<20 != episode.ClientFrameLimit {
		t.Fatalf("the SkyRL client takes frames up to %d MiB, the engine is sized for %d MiB", mib, episode.ClientFrameLimit>>20)
	}
	if episode.MaxReplyResultBytesCap+(2<<20) > episode.ClientFrameLimit/6*5 {
		t.Fatalf("a reply's results (%d) leave too little of the frame for the rest", episode.MaxReplyResultBytesCap)
	}
}
