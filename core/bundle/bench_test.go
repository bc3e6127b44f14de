package bundle

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// genFamily writes a bundle with one seeded family of n tasks (and an eval
// over all of them); bad, if > 0, is a seeds line given an invalid pattern.
func genFamily(tb testing.TB, dir string, n, bad int) {
	tb.Helper()
	files := map[string]string{
		"README.md":          "# big\n\nOne seeded family of many tasks.\n",
		"envs/grid/env.toml": "command = [\"bin/grid\"]\nbuild = [\"go\", \"build\", \"-o\", \"bin/grid\", \".\"]\n",
		"tasks/day.json": `[
  {"id": "env", "type": "deploy_env", "env": "grid"},
  {"id": "load", "type": "call_tool", "tool": "load_day", "arguments": {"day": "<day>", "region": "<region>", "opts": {"prices": "<prices>"}}},
  {"id": "play", "type": "prompt_agent",
   "system_prompt": "You run a power grid. Call tools as <tool_call>{...}</tool_call>.",
   "prompt": "Day <day> in <region>: keep the lights on for 24 hours at the lowest cost.",
   "max_turns": 48},
  {"id": "grade", "type": "verify_tool", "tool": "grade", "arguments": {"day": "<day>"}},
  {"id": "answer", "type": "verify_answer", "turn": "play", "pattern": "<pattern>"}
]
`,
		"evals/train.toml": "tasks = [\"day/*\"]\n",
	}
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	f, err := os.Create(filepath.Join(dir, "tasks", "day.seeds.jsonl"))
	if err != nil {
		tb.Fatal(err)
	}
	w := bufio.NewWriter(f)
	regions := []string{"north", "south", "east", "west"}
	for i := 1; i <= n; i++ {
		pattern := `^\\s*cost\\s*=\\s*[0-9]+\\s*$`
		if i == bad {
			pattern = "(unclosed"
		}
		fmt.Fprintf(w, `{"id": "d%06d", "day": %d, "region": %q, "prices": [%d, %d, %d], "pattern": "%s"}`+"\n",
			i, i, regions[i%4], i%97, i%89, i%83, pattern)
	}
	if err := w.Flush(); err != nil {
		tb.Fatal(err)
	}
	if err := f.Close(); err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkLoad100k loads and validates a bundle of 100,000 seeded tasks.
// The floor is reading the seeds file and decoding each line into a
// map[string]any: the least any loader must do.
//
//	go test ./core/bundle -run '^$' -bench Load100k -benchtime 5x -cpu 2
func BenchmarkLoad100k(b *testing.B) {
	const n = 100_000
	dir := filepath.Join(b.TempDir(), "big")
	genFamily(b, dir, n, 0)
	seeds := filepath.Join(dir, "tasks", "day.seeds.jsonl")
	var floor, load, cpu time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		start := time.Now()
		if got := floorDecode(b, seeds); got != n {
			b.Fatalf("floor decoded %d lines", got)
		}
		floor += time.Since(start)
		b.StartTimer()

		start, cpu0 := time.Now(), cpuTime()
		bd, err := Load(dir, Options{})
		load += time.Since(start)
		cpu += cpuTime() - cpu0
		if err != nil {
			b.Fatal(err)
		}
		if len(bd.Tasks) != n || len(bd.Splits[1].Tasks) != n {
			b.Fatalf("loaded %d tasks", len(bd.Tasks))
		}
	}
	b.ReportMetric(load.Seconds()/float64(b.N), "s/load")
	b.ReportMetric(floor.Seconds()/float64(b.N), "s/floor")
	b.ReportMetric(float64(load)/float64(floor), "x-floor")
	b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/load")
}

func floorDecode(tb testing.TB, file string) int {
	data, err := os.ReadFile(file)
	if err != nil {
		tb.Fatal(err)
	}
	n := 0
	for _, line := range bytes.Split(data, []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			tb.Fatal(err)
		}
		n++
	}
	return n
}

// A family big enough to be loaded in parallel chunks still names the one
// bad line, and a good one fills every task.
func TestLoadLargeFamily(t *testing.T) {
	const n = 5000
	dir := filepath.Join(t.TempDir(), "big")
	genFamily(t, dir, n, 4321)
	_, err := Load(dir, Options{})
	want := filepath.Join(dir, "tasks", "day.seeds.jsonl") + `:4321: task day/d004321: step "answer": invalid pattern "(unclosed"`
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "1 problem") {
		t.Fatalf("err %v, want one problem %s", err, want)
	}

	dir = filepath.Join(t.TempDir(), "big")
	genFamily(t, dir, n, 0)
	b := mustLoad(t, dir)
	if len(b.Tasks) != n || len(b.Toolsets()) != 1 || b.Toolsets()[0].Count != n {
		t.Fatalf("%d tasks, %d toolsets", len(b.Tasks), len(b.Toolsets()))
	}
	for _, i := range []int{0, 2047, 2048, n - 1} {
		task := b.Tasks[i]
		want := fmt.Sprintf("day/d%06d", i+1)
		args := fmt.Sprintf(`{"day":%d,"region":%q,"opts":{"prices":[%d,%d,%d]}}`, i+1, []string{"north", "south", "east", "west"}[(i+1)%4], (i+1)%97, (i+1)%89, (i+1)%83)
		if task.ID != want || task.Line != i+1 || string(task.Steps[1].Arguments) != args {
			t.Errorf("task %d: id %s line %d args %s; want %s, %d, %s", i, task.ID, task.Line, task.Steps[1].Arguments, want, i+1, args)
		}
		if task.Steps[4].Regexp == nil || !task.Steps[4].Regexp.MatchString("cost = 12") {
			t.Errorf("task %d: pattern not compiled: %+v", i, task.Steps[4])
		}
	}
}
