package skyrl

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/agentenv/agentenv/core/bundle"
	"github.com/agentenv/agentenv/core/server"
	"github.com/agentenv/agentenv/core/tokenizer"
	"github.com/agentenv/agentenv/core/tokenizer/tokenizertest"
)

// gridsimCatalog serves examples/gridsim's catalogue from memory, its
// toolset's tools from testdata: the writer's work without HTTP.
type gridsimCatalog struct {
	c     *server.BundleCatalog
	tools json.RawMessage
}

func (g gridsimCatalog) Splits(context.Context) ([]Split, error) {
	var out []Split
	for _, s := range g.c.Splits() {
		out = append(out, Split{Name: s.Name, Size: s.Size})
	}
	return out, nil
}

func (g gridsimCatalog) Tasks(_ context.Context, split string, start, stop int) ([]TaskEntry, error) {
	list, _, err := g.c.Tasks(split, start, stop)
	out := make([]TaskEntry, len(list))
	for i, e := range list {
		out[i] = TaskEntry{Index: e.Index, TaskID: e.TaskID, Toolset: e.Toolset}
	}
	return out, err
}

func (g gridsimCatalog) Task(_ context.Context, id string) (Task, error) {
	info, err := g.c.Task(id)
	t := Task{TaskID: info.TaskID, Toolset: info.Toolset}
	for _, m := range info.Prompt {
		t.Prompt = append(t.Prompt, Message{Role: m.Role, Content: m.Content})
	}
	return t, err
}

func (g gridsimCatalog) Tools(context.Context, string) (json.RawMessage, error) { return g.tools, nil }

// BenchmarkGridSimRows writes all of GridSim's rows as the command does:
// 2,200 distinct tasks rendered with Qwen3's template both ways (tools=
// and in the system message), checked, counted twice, and 4,400 rows
// written to all/eval/train.parquet. The floor, in the same run, is
// encoding/json of the 2,200 rows of all.parquet: the least a writer of
// the same rows does.
//
//	go test ./core/dataset/skyrl -run '^$' -bench GridSimRows -benchtime 5x -cpu 2
func BenchmarkGridSimRows(b *testing.B) {
	bd, err := bundle.Load(filepath.Join("..", "..", "..", "examples", "gridsim"), bundle.Options{})
	if err != nil {
		b.Fatal(err)
	}
	tools, err := os.ReadFile(filepath.Join("testdata", "gridsim_tools.json"))
	if err != nil {
		b.Fatal(err)
	}
	cat := gridsimCatalog{c: server.NewBundleCatalog(bd), tools: tools}
	tmpl := qwen3Template(b)
	// Qwen3's real tokenizer (core/tokenizer over the npm oracle's
	// tokenizer.json), as `agentenv skyrl rows --tokenizer` loads it.
	tok, err := tokenizer.Load(tokenizertest.Qwen3Dir(b))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	o := testOptions("http://127.0.0.1:8200")
	o.MaxPromptLength = 100_000
	dir := b.TempDir()
	var write, floor time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		res, err := Write(ctx, cat, tmpl, tok, dir, o)
		write += time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		if res.Tasks != 2200 || len(res.Files) != 3 {
			b.Fatalf("%+v", res)
		}

		b.StopTimer()
		rows, err := ReadRows(filepath.Join(dir, "all.parquet"))
		if err != nil || len(rows) != 2200 {
			b.Fatal(err)
		}
		runtime.GC()
		start = time.Now()
		n := 0
		for _, r := range rows {
			j, err := json.Marshal(r)
			if err != nil {
				b.Fatal(err)
			}
			n += len(j)
		}
		floor += time.Since(start)
		if n == 0 {
			b.Fatal("nothing encoded")
		}
		b.StartTimer()
	}
	b.ReportMetric(write.Seconds()/float64(b.N), "s/write")
	b.ReportMetric(floor.Seconds()/float64(b.N), "s/floor")
	b.ReportMetric(float64(write)/float64(floor), "x-floor")
}
