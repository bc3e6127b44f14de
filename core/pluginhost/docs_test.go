package pluginhost

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The worked example in docs/plugins.md is a copy of testdata/examplereward;
// these tests keep the copy exact and the example working.

var exampleBlock = regexp.MustCompile("(?s)<!-- example: ([^ ]+) -->\n```go\n(.*?)```")

func TestDocsExampleMatchesTestdata(t *testing.T) {
	doc, err := os.ReadFile("../../docs/plugins.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := exampleBlock.FindAllSubmatch(doc, -1)
	if len(blocks) < 2 {
		t.Fatalf("docs/plugins.md has %d example blocks, want the plugin and its test", len(blocks))
	}
	for _, b := range blocks {
		path := string(b[1])
		want, err := os.ReadFile(filepath.Join("../..", path))
		if err != nil {
			t.Fatalf("docs/plugins.md quotes %s: %v", path, err)
		}
		if string(b[2]) != string(want) {
			t.Errorf("the copy of %s in docs/plugins.md differs from the file: update the doc", path)
		}
	}
}

func TestDocsExampleServes(t *testing.T) {
	dir := t.TempDir()
	install(t, build(t, "examplereward", ""), dir, "agentenv-reward-weighted")
	h := newHost(t, dir, nil)
	ctx := ctxTimeout(t, 60*time.Second)
	r, err := h.Reward(ctx, "weighted", json.RawMessage(`{"weights": {"score/grade": 3}}`))
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.Combine(ctx, map[string]float64{"score/grade": 1, "score/format": 0})
	if err != nil || got != 0.75 {
		t.Fatalf("Combine = %v, %v; want 0.75", got, err)
	}
	_, err = h.Reward(ctx, "weighted", json.RawMessage(`{"weights": {"score/grade": -1}}`))
	if err == nil || !strings.Contains(err.Error(), `plugin reward-weighted`) || !strings.Contains(err.Error(), `at "/weights/score~1grade"`) {
		t.Fatalf("negative weight: %v", err)
	}
}

// The example's own test (quoted in the docs) passes.
func TestDocsExampleTestPasses(t *testing.T) {
	out, err := exec.Command(goTool, "test", "-count=1", "./testdata/examplereward").CombinedOutput()
	if err != nil {
		t.Fatalf("go test ./testdata/examplereward: %v\n%s", err, out)
	}
}
