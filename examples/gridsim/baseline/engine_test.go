package baseline

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/agentenv/agentenv/core/bundle"
)

// Every eval task plays to a score through the episode engine and the
// local process sandbox: the optimal policy grades exactly 1 on each, the
// idle policy exactly 0.2, and no env process is left behind.
func TestEveryEvalTaskThroughTheEngine(t *testing.T) {
	dir, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	b, err := bundle.Load(dir, bundle.Options{})
	if err != nil {
		t.Fatal(err)
	}
	split, err := b.Split("eval")
	if err != nil {
		t.Fatal(err)
	}
	tasks := split.Tasks
	if testing.Short() {
		tasks = tasks[:20]
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	stateDir := t.TempDir()
	log := hclog.New(&hclog.LoggerOptions{Level: hclog.Warn, Output: testWriter{t}})
	loc, err := LocalEngine(ctx, dir, stateDir, log)
	if err != nil {
		t.Fatal(err)
	}
	defer loc.Close(context.Background())
	runner := &Engine{Player: loc.Engine}
	for _, c := range []struct {
		policy Policy
		want   float64
	}{{Optimal{}, 1}, {Idle{}, 0.2}} {
		results, err := RunAll(ctx, runner, tasks, c.policy, 4)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range results {
			if r.Err != nil {
				t.Fatalf("%s on %s: %v", c.policy.Name(), r.TaskID, r.Err)
			}
			if r.Grade != c.want {
				t.Fatalf("%s on %s: grade %v, want %v", c.policy.Name(), r.TaskID, r.Grade, c.want)
			}
		}
	}
	left, err := loc.LeftOver(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Fatalf("sandboxes left after the episodes: %v", left)
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}
