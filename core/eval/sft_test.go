package eval

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/agentenv/agentenv/core/dataset/skyrl/oracles"
)

// The SFT file holds the rollouts at or over the reward, in task and
// sample order, each up to its last reply; DuckDB, a reader we did not
// write, reads its messages column as TRL and SkyRL's SFT read it.
func TestSFTReadByDuckDB(t *testing.T) {
	conv := func(last ...Message) []Message {
		return append([]Message{{"system", "You trade.\n\n# Tools\n\n<tools>…</tools>"}, {"user", "Day: Monday"}}, last...)
	}
	call := Message{"assistant", "<tool_call>\n{\"name\": \"get_prices\", \"arguments\": {}}\n</tool_call>"}
	answer := Message{"tool", `{"hours": 24, "prices": [1.5, -2]}`}
	done := Message{"assistant", "The schedule is submitted."}
	recs := []Record{
		{TaskID: "day/c", Index: 2, Reward: reward(1), Messages: conv(call, answer, done)},
		{TaskID: "day/a", Index: 0, Sample: 1, Reward: reward(0.95), Messages: conv(call, answer)}, // capped after a call: ends at the call
		{TaskID: "day/a", Index: 0, Sample: 0, Reward: reward(0.9), Messages: conv(call, answer, done)},
		{TaskID: "day/b", Index: 1, Reward: reward(0.5), Messages: conv(call, answer, done)},                     // below the reward
		{TaskID: "day/d", Index: 3, Failure: &Failure{Cause: CauseModel}, Messages: conv(call)},                  // failed
		{TaskID: "day/e", Index: 4, Reward: reward(1), Messages: conv()},                                         // no reply
		{TaskID: "day/f", Index: 5, Reward: reward(1), Failure: &Failure{Cause: CauseEnv}, Messages: conv(done)}, // failed
	}
	dir := t.TempDir()
	in := filepath.Join(dir, "results.jsonl")
	var lines []byte
	for _, r := range recs {
		b, _ := json.Marshal(r)
		lines = append(append(lines, b...), '\n')
	}
	lines = append(lines, `{"task_id": "day/half`...) // a cut-off last line is not read
	if err := os.WriteFile(in, lines, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "sft.parquet")
	res, err := WriteSFT(in, out, 0.9)
	if err != nil {
		t.Fatal(err)
	}
	if res.Rows != 3 || res.File != out {
		t.Fatalf("%+v", res)
	}
	var got struct {
		Columns []struct {
			ColumnName string `json:"column_name"`
			ColumnType string `json:"column_type"`
		}
		Rows []struct {
			Messages []Message `json:"messages"`
			TaskID   string    `json:"task_id"`
			Sample   string    `json:"sample"` // BIGINT comes as a string
			Reward   float64   `json:"reward"`
		}
		Picked   []map[string]any
		Metadata []struct{ Key, Value string }
	}
	raw := oracles.DuckDBScript(t, filepath.Join("testdata", "read_sft.js"), out)
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
	types := map[string]string{}
	for _, c := range got.Columns {
		types[c.ColumnName] = c.ColumnType
	}
	wantTypes := map[string]string{"messages": "STRUCT(\"role\" VARCHAR, \"content\" VARCHAR)[]", "task_id": "VARCHAR", "sample": "BIGINT", "reward": "DOUBLE"}
	if !reflect.DeepEqual(types, wantTypes) {
		t.Fatalf("columns %v, want %v", types, wantTypes)
	}
	type row struct {
		task   string
		sample string
		reward float64
		msgs   []Message
	}
	want := []row{
		{"day/a", "0", 0.9, conv(call, answer, done)},
		{"day/a", "1", 0.95, conv(call)},
		{"day/c", "0", 1, conv(call, answer, done)},
	}
	if len(got.Rows) != len(want) {
		t.Fatalf("%d rows: %+v", len(got.Rows), got.Rows)
	}
	for i, w := range want {
		g := got.Rows[i]
		if g.TaskID != w.task || g.Sample != w.sample || g.Reward != w.reward || !reflect.DeepEqual(g.Messages, w.msgs) {
			t.Errorf("row %d: %+v\nwant %+v", i, g, w)
		}
		if p := got.Picked[i]; p["first_role"] != "system" || p["last_role"] != "assistant" {
			t.Errorf("row %d as addressed: %v", i, p)
		}
	}
	meta := map[string]string{}
	for _, m := range got.Metadata {
		meta[m.Key] = m.Value
	}
	if meta["agentenv.rows"] != "sft/1" {
		t.Errorf("metadata %v", meta)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Errorf("left %v", entries)
	}
}
