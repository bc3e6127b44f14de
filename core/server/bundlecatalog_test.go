package server

import (
	"strings"
	"testing"

	"github.com/agentenv/agentenv/core/bundle"
	"github.com/agentenv/agentenv/core/episode"
)

func TestBundleCatalog(t *testing.T) {
	b, err := bundle.Load("../bundle/testdata/full", bundle.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := NewBundleCatalog(b)
	splits := c.Splits()
	if splits[0].Name != "all" || splits[0].Size != len(b.Tasks) || len(splits) != len(b.Splits) {
		t.Fatalf("splits %+v", splits)
	}
	all, size, err := c.Tasks("all", 0, -1)
	if err != nil || size != len(b.Tasks) || len(all) != size {
		t.Fatalf("all: %d of %d, %v", len(all), size, err)
	}
	for i, e := range all {
		if e.Index != i || e.TaskID != b.Tasks[i].ID || e.Toolset != b.Tasks[i].Toolset || e.Toolset == "" {
			t.Fatalf("entry %d: %+v", i, e)
		}
	}
	cases := []struct {
		split       string
		start, stop int
		want        int
		err         string
	}{
		{"all", 1, 3, 2, ""},
		{"all", 2, 2, 0, ""},
		{"all", size + 5, -1, 0, ""},
		{"all", 0, size + 5, size, ""},
		{"test", 0, -1, 3, ""},
		{"nope", 0, -1, 0, `no split "nope"`},
	}
	for _, tc := range cases {
		got, _, err := c.Tasks(tc.split, tc.start, tc.stop)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || episode.CodeOf(err) != episode.CodeNotFound {
				t.Errorf("%s: err %v", tc.split, err)
			}
			continue
		}
		if err != nil || len(got) != tc.want {
			t.Errorf("%s[%d:%d]: %d tasks, %v; want %d", tc.split, tc.start, tc.stop, len(got), err, tc.want)
		}
	}
	chat, err := c.Task("chat")
	if err != nil {
		t.Fatal(err)
	}
	if chat.Turns != 2 || len(chat.Prompt) != 1 || chat.Prompt[0].Content != "Look at the board and tell me its size." ||
		len(chat.Steps) != 4 || chat.Steps[3] != (StepInfo{ID: "final", Type: "verify_answer"}) {
		t.Fatalf("chat: %+v", chat)
	}
	if _, err := c.Task("ghost"); episode.CodeOf(err) != episode.CodeNotFound {
		t.Fatalf("ghost: %v", err)
	}
	info, err := BundleInfo(b, "1.2.3")
	if err != nil || info.Name != "full" || info.Description == "" || !strings.HasPrefix(info.Readme, "# full") || info.Version != "1.2.3" {
		t.Fatalf("info %+v %v", info, err)
	}
}
