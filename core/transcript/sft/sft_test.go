package sft

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentenv/agentenv/core/dataset/skyrl/oracles"
	"github.com/agentenv/agentenv/core/episode"
	"github.com/agentenv/agentenv/core/transcript"
)

func f64(v float64) *float64 { return &v }

// Write keeps the records scored at least the reward that have a reply,
// in task and start order, samples numbered per task, each up to its last
// reply; DuckDB reads the file as eval's SFT file.
func TestWrite(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 5, 0, 0, 0, time.UTC)
	rec := func(id, task string, at int, reward *float64, outcome episode.Outcome, turns ...transcript.Turn) *transcript.Record {
		return &transcript.Record{Format: transcript.Format, EpisodeID: id, TaskID: task, Split: "train", Started: t0.Add(time.Duration(at) * time.Second),
			Reward: reward, Outcome: outcome, Prompt: []transcript.Message{{Role: "system", Content: "S"}, {Role: "user", Content: "U " + id}}, Turns: turns}
	}
	call := transcript.Turn{Reply: "<tool_call>c</tool_call>", Messages: []transcript.Message{{Role: "tool", Content: "r"}}}
	end := transcript.Turn{Reply: "done", Messages: []transcript.Message{}}
	recs := []*transcript.Record{
		rec("b0", "day/b", 0, f64(1), episode.OutcomeDone, call, end),
		rec("a1", "day/a", 5, f64(0.9), episode.OutcomeDone, call), // capped after a call: ends at the call
		rec("a0", "day/a", 1, f64(1), episode.OutcomeDone, call, end),
		rec("low", "day/a", 2, f64(0.5), episode.OutcomeDone, end),
		rec("none", "day/c", 3, f64(1), episode.OutcomeDone), // no reply
		rec("fail", "day/c", 4, nil, episode.OutcomeFailed, call),
		rec("eval", "day/d", 6, f64(1), episode.OutcomeDone, end),
	}
	recs[6].Split = "eval"
	dir := t.TempDir()
	var lines []byte
	for _, r := range recs {
		b, _ := json.Marshal(r)
		lines = append(append(lines, b...), '\n')
	}
	if err := os.WriteFile(filepath.Join(dir, "2026-12-02.jsonl"), lines, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "sft.parquet")
	res, err := Write([]string{dir}, out, Options{Filter: transcript.Filter{Split: "train"}, MinReward: 0.9})
	if err != nil {
		t.Fatal(err)
	}
	if res.Rows != 3 || res.Matched != 6 || res.Read.Records != 7 {
		t.Fatalf("%+v", res)
	}
	var got struct {
		Rows []struct {
			Messages []struct{ Role, Content string }
			TaskID   string `json:"task_id"`
			Sample   string
			Reward   float64
		}
		Metadata []struct{ Key, Value string }
	}
	raw := oracles.DuckDBScript(t, filepath.Join("..", "..", "eval", "testdata", "read_sft.js"), out)
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
	want := []struct {
		task, sample, user, last string
		n                        int
	}{
		{"day/a", "0", "U a0", "done", 5},
		{"day/a", "1", "U a1", "<tool_call>c</tool_call>", 3},
		{"day/b", "0", "U b0", "done", 5},
	}
	if len(got.Rows) != len(want) {
		t.Fatalf("rows %+v", got.Rows)
	}
	for i, w := range want {
		g := got.Rows[i]
		if g.TaskID != w.task || g.Sample != w.sample || len(g.Messages) != w.n || g.Messages[1].Content != w.user || g.Messages[w.n-1].Content != w.last || g.Messages[w.n-1].Role != "assistant" {
			t.Errorf("row %d: %+v, want %+v", i, g, w)
		}
	}
	meta := map[string]string{}
	for _, m := range got.Metadata {
		meta[m.Key] = m.Value
	}
	if meta["agentenv.rows"] != "sft/1" {
		t.Errorf("metadata %v: not eval's SFT file", meta)
	}

	// Nothing qualifies: an error saying so, and no file.
	none := filepath.Join(t.TempDir(), "none.parquet")
	if _, err := Write([]string{dir}, none, Options{MinReward: 2}); !errors.Is(err, ErrNoRows) || !strings.Contains(err.Error(), "7 records read") {
		t.Errorf("err = %v", err)
	}
	if _, err := os.Stat(none); !os.IsNotExist(err) {
		t.Errorf("a file was written with no rows: %v", err)
	}
}
