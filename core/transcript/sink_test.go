package transcript

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentenv/agentenv/core/episode"
	"github.com/agentenv/agentenv/sdk/toolformat"
)

func rec(id string, textBytes int) *Record {
	return &Record{EpisodeID: id, Turns: []Turn{{Reply: strings.Repeat("x", textBytes)}}}
}

// Recent keeps the newest records within its count and bytes, newest
// first, and always the newest one.
func TestRecentBounds(t *testing.T) {
	for _, tc := range []struct {
		name     string
		n        int
		maxBytes int64
		sizes    []int
		want     []string
	}{
		{"under both", 5, 1 << 20, []int{10, 10, 10}, []string{"e2", "e1", "e0"}},
		{"count", 2, 1 << 20, []int{10, 10, 10}, []string{"e2", "e1"}},
		{"bytes", 10, 3500, []int{1000, 1000, 1000, 1000}, []string{"e3", "e2"}},
		{"newest stays however large", 10, 100, []int{10, 5000}, []string{"e1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewRecent(tc.n, tc.maxBytes)
			for i, s := range tc.sizes {
				c.Record(rec(fmt.Sprintf("e%d", i), s))
			}
			var got []string
			for _, r := range c.List() {
				got = append(got, r.EpisodeID)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("kept %v, want %v", got, tc.want)
			}
			if c.Total() != uint64(len(tc.sizes)) {
				t.Errorf("total %d, want %d", c.Total(), len(tc.sizes))
			}
			if _, ok := c.Get(tc.want[0]); !ok {
				t.Errorf("Get(%s) found nothing", tc.want[0])
			}
			if _, ok := c.Get("e-none"); ok {
				t.Error("Get of an id never recorded found one")
			}
		})
	}
}

// FromResult splits scores from metrics, carries the times, and turns
// each exchange into a turn; the conversation interleaves the replies.
func TestFromResult(t *testing.T) {
	r1 := 0.75
	idx := 3
	began := time.Date(2026, 12, 2, 5, 0, 0, 0, time.UTC)
	res := episode.Result{
		EpisodeID: "ep-1", TaskID: "day/1", Split: "train", Index: &idx, ToolFormat: "hermes", Sandbox: "local",
		Began: began, Ended: began.Add(3 * time.Second),
		Spans:  []episode.Span{{Phase: episode.PhaseDeploy, Took: time.Second}, {Phase: episode.PhaseStep, Took: 500 * time.Millisecond}},
		Reward: &r1, Metrics: map[string]float64{"score/grade": 0.75, "turns": 2},
		Outcome: episode.OutcomeDone, Cause: episode.CauseCompleted,
		Transcript: &episode.Transcript{
			Prompt: []episode.Message{{Role: "system", Content: "S"}, {Role: "user", Content: "U"}},
			Tools:  []episode.Tool{{Name: "add", Parameters: json.RawMessage(`{"type":"object"}`)}},
			Exchanges: []episode.Exchange{
				{Reply: "r1", Parsed: toolformat.Parsed{Calls: []toolformat.Call{{Name: "add", Arguments: json.RawMessage(`{"n":1}`)}},
					Unparsed: []toolformat.Unparsed{{Text: strings.Repeat("é", MaxUnparsedText), Reason: "bad JSON"}}},
					Messages: []episode.Message{{Role: "tool", Content: "3"}, {Role: "tool", Content: "Error: bad"}}, Took: 200 * time.Millisecond},
				{Reply: "done", Took: 100 * time.Millisecond},
			},
		},
	}
	got := FromResult(res)
	if got.Format != Format || got.Split != "train" || *got.Index != 3 || got.Source != episode.SourceNone || !got.Ended.Equal(res.Ended) {
		t.Errorf("header %+v", got)
	}
	if fmt.Sprint(got.Scores) != "map[grade:0.75]" || fmt.Sprint(got.Metrics) != "map[turns:2]" {
		t.Errorf("scores %v metrics %v", got.Scores, got.Metrics)
	}
	if got.Times["deploy"] != 1 || got.Times["step"] != 0.5 || len(got.Times) != len(episode.Phases) {
		t.Errorf("times %v", got.Times)
	}
	if len(got.Turns) != 2 || got.Turns[0].Calls[0].Name != "add" || got.Turns[0].StepS != 0.2 || got.Turns[1].Messages == nil {
		t.Fatalf("turns %+v", got.Turns)
	}
	if u := got.Turns[0].Unparsed[0]; len(u.Text) > MaxUnparsedText || !strings.HasPrefix(strings.Repeat("é", MaxUnparsedText), u.Text) || u.Reason != "bad JSON" {
		t.Errorf("unparsed text not cut on a rune boundary: %d bytes", len(u.Text))
	}
	var roles []string
	for _, m := range got.Conversation() {
		roles = append(roles, m.Role+":"+m.Content)
	}
	if want := "[system:S user:U assistant:r1 tool:3 tool:Error: bad assistant:done]"; fmt.Sprint(roles) != want {
		t.Errorf("conversation %v, want %s", roles, want)
	}
	// Without a transcript (the engine kept none) the record still says
	// how the episode went, with empty prompt and turns.
	res.Transcript = nil
	bare := FromResult(res)
	b, _ := json.Marshal(bare)
	if !strings.Contains(string(b), `"prompt":[]`) || !strings.Contains(string(b), `"turns":[]`) {
		t.Errorf("bare record %s", b)
	}
}
