package terminal

import (
	"context"
	"encoding/json"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// docs/harbor-tools.md shows each tool's schema exactly as tools/list
// serves it, and names every cause run_tests can fail with.
func TestDocsMatchTheTools(t *testing.T) {
	doc, err := os.ReadFile("../../docs/harbor-tools.md")
	if err != nil {
		t.Fatal(err)
	}
	var blocks []any
	for _, m := range regexp.MustCompile("(?s)```json\n(.*?)```").FindAllSubmatch(doc, -1) {
		var v any
		if err := json.Unmarshal(m[1], &v); err != nil {
			t.Fatalf("a json block of the docs does not parse: %v\n%s", err, m[1])
		}
		blocks = append(blocks, v)
	}
	e := newEnv(t, Options{})
	tools, err := e.session.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(tools.Tools) != 3 {
		t.Errorf("%d tools listed, want 3", len(tools.Tools))
	}
	for _, tool := range tools.Tools {
		raw, err := json.Marshal(tool.InputSchema)
		if err != nil {
			t.Fatal(err)
		}
		var served any
		if err := json.Unmarshal(raw, &served); err != nil {
			t.Fatal(err)
		}
		found := false
		for _, b := range blocks {
			found = found || reflect.DeepEqual(b, served)
		}
		if !found {
			t.Errorf("docs/harbor-tools.md has no json block equal to %s's schema:\n%s", tool.Name, raw)
		}
		if !strings.Contains(string(doc), "## `"+tool.Name+"`") {
			t.Errorf("docs/harbor-tools.md has no section for %s", tool.Name)
		}
	}
	for _, cause := range []string{CauseTimeout, CauseNoReward, CauseBadReward, CauseBadRequest, CauseCancelled, CauseInternal} {
		if !strings.Contains(string(doc), "| `"+cause+"` |") {
			t.Errorf("docs/harbor-tools.md's cause table lacks %s", cause)
		}
	}
}
