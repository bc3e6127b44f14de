package transcript

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/agentenv/agentenv/core/episode"
)

func f64(v float64) *float64 { return &v }

func TestFilter(t *testing.T) {
	done := &Record{EpisodeID: "a", TaskID: "day/eval-001", Split: "eval", Outcome: episode.OutcomeDone, Cause: episode.CauseCompleted, Reward: f64(0.5)}
	failed := &Record{EpisodeID: "b", TaskID: "day/train-001", Split: "train", Outcome: episode.OutcomeFailed, Cause: episode.CauseEnvCrashed}
	for _, tc := range []struct {
		name   string
		f      Filter
		want   string // ids matched, of done and failed
		errHas string
	}{
		{"zero picks all", Filter{}, "ab", ""},
		{"task id", Filter{Task: "day/eval-001"}, "a", ""},
		{"task glob across slashes", Filter{Task: "*-001"}, "ab", ""},
		{"task glob ?", Filter{Task: "day/?val-*"}, "a", ""},
		{"task glob is whole", Filter{Task: "eval"}, "", ""},
		{"glob metacharacters are literal", Filter{Task: "day/eval-00[1]"}, "", ""},
		{"split", Filter{Split: "train"}, "b", ""},
		{"outcome", Filter{Outcome: episode.OutcomeFailed}, "b", ""},
		{"cause", Filter{Cause: episode.CauseCompleted}, "a", ""},
		{"episode", Filter{EpisodeID: "b"}, "b", ""},
		{"min reward inclusive", Filter{MinReward: f64(0.5)}, "a", ""},
		{"max reward excludes the unscored", Filter{MaxReward: f64(10)}, "a", ""},
		{"reward over", Filter{MinReward: f64(0.6)}, "", ""},
		{"reward range", Filter{MinReward: f64(0), MaxReward: f64(0.5)}, "a", ""},
		{"empty range", Filter{MinReward: f64(1), MaxReward: f64(0)}, "", "is empty"},
		{"unknown outcome", Filter{Outcome: "won"}, "", `outcome "won": want done, failed or abandoned`},
		{"unknown cause", Filter{Cause: "bad_luck"}, "", `cause "bad_luck": want one of completed, max_turns`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.f.Check()
			if tc.errHas != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errHas) {
					t.Fatalf("Check: %v, want %q", err, tc.errHas)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			for _, r := range []*Record{done, failed} {
				if tc.f.Match(r) {
					got += r.EpisodeID
				}
			}
			if got != tc.want {
				t.Errorf("matched %q, want %q", got, tc.want)
			}
		})
	}
}

// WriteText shows the header, the prompt, each reply with its calls read
// and unreadable, and the answers, in order.
func TestWriteText(t *testing.T) {
	idx := 2
	start := time.Date(2026, 12, 2, 5, 0, 0, 0, time.UTC)
	r := &Record{
		EpisodeID: "ep-1", TaskID: "day/1", Split: "eval", Index: &idx, ToolFormat: "hermes",
		Outcome: episode.OutcomeFailed, Cause: episode.CauseEnvCrashed, Source: episode.SourceInfrastructure, Error: "EXECUTION_ERROR: env died",
		Times: map[string]float64{"deploy": 1.5, "step": 0.0004}, Started: start, Ended: start.Add(2 * time.Second),
		Prompt: []Message{{Role: "system", Content: "Be good."}, {Role: "user", Content: "Go."}},
		Tools:  []Tool{{Name: "add"}, {Name: "grade"}},
		Turns: []Turn{
			{Reply: "<tool_call>x</tool_call>", Calls: []Call{{Name: "add", Arguments: []byte("{\n  \"n\": 1\n}")}},
				Unparsed: []Unparsed{{Reason: "invalid JSON"}}, UnparsedOmitted: 3,
				Messages: []Message{{Role: "tool", Content: "3"}}, StepS: 0.0004},
			{Reply: ""},
		},
	}
	var b bytes.Buffer
	if err := WriteText(&b, r); err != nil {
		t.Fatal(err)
	}
	got := b.String()
	want := []string{
		"episode ep-1 · task day/1 (split eval, index 2) · hermes\n",
		"failed (env_crashed, infrastructure) · 2 turns\n",
		"error: EXECUTION_ERROR: env died\n",
		"started 2026-12-02T05:00:00Z · took 2s\n",
		"times: deploy 1.5s, step 400µs\n",
		"tools: add, grade\n",
		"\n── system\nBe good.\n", "\n── user\nGo.\n",
		"\n── assistant (turn 1, 400µs)\n<tool_call>x</tool_call>\n",
		"  ▸ call read: add {\"n\":1}\n", "  ▸ call unreadable: invalid JSON\n", "  ▸ 3 more calls not sent by the tool format\n",
		"\n── tool\n3\n",
		"\n── assistant (turn 2, 0s)\n(empty)\n",
	}
	last := 0
	for _, w := range want {
		i := strings.Index(got[last:], w)
		if i < 0 {
			t.Fatalf("lacks %q after byte %d:\n%s", w, last, got)
		}
		last += i + len(w)
	}
}
