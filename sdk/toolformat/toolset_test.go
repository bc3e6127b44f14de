package toolformat_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/agentenv/agentenv/sdk"
	"github.com/agentenv/agentenv/sdk/sdktest"
	"github.com/agentenv/agentenv/sdk/toolformat"
)

// namesFormat answers every reply with the names of the tools it was given.
type namesFormat struct{}

func (namesFormat) Info() sdk.Info {
	return sdk.Info{Name: "names", Kind: sdk.KindToolFormat, Version: "1"}
}

func (namesFormat) Parse(_ context.Context, _ string, tools []toolformat.Tool) (toolformat.Parsed, error) {
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.Name
	}
	return toolformat.Parsed{Content: strings.Join(names, ",")}, nil
}

func TestToolSetIDs(t *testing.T) {
	tool := func(name, desc, params string) toolformat.Tool {
		return toolformat.Tool{Name: name, Description: desc, Parameters: json.RawMessage(params)}
	}
	base := toolformat.NewToolSet([]toolformat.Tool{tool("a", "d", `{}`), tool("b", "", `{}`)}).ID()
	for name, tools := range map[string][]toolformat.Tool{
		"another name":        {tool("c", "d", `{}`), tool("b", "", `{}`)},
		"another description": {tool("a", "e", `{}`), tool("b", "", `{}`)},
		"another schema":      {tool("a", "d", `{"type":"object"}`), tool("b", "", `{}`)},
		"another order":       {tool("b", "", `{}`), tool("a", "d", `{}`)},
		"fields shifted":      {tool("ad", "", `{}`), tool("b", "", `{}`)},
		"one tool fewer":      {tool("a", "d", `{}`)},
	} {
		if id := toolformat.NewToolSet(tools).ID(); id == base || id == "" {
			t.Errorf("%s: id %q, want one of its own", name, id)
		}
	}
	if again := toolformat.NewToolSet([]toolformat.Tool{tool("a", "d", `{}`), tool("b", "", `{}`)}).ID(); again != base {
		t.Errorf("the same tools: id %q, want %q", again, base)
	}
	if id := toolformat.NewToolSet(nil).ID(); id != "" {
		t.Errorf("no tools: id %q, want none", id)
	}
}

// A plugin keeps a bounded number of tool sets. A parse naming one it
// dropped is answered "unknown tool set"; the host sends that set again and
// retries, and the caller sees the right answer.
func TestDroppedToolSetIsSentAgain(t *testing.T) {
	c := sdktest.ToolFormat(t, namesFormat{})
	ctx := context.Background()
	set := func(i int) *toolformat.ToolSet {
		return toolformat.NewToolSet([]toolformat.Tool{{Name: fmt.Sprintf("t%d", i), Parameters: json.RawMessage(`{}`)}})
	}
	parse := func(s *toolformat.ToolSet) string {
		t.Helper()
		got, err := c.ParseSet(ctx, "reply", s)
		if err != nil {
			t.Fatalf("ParseSet: %v", err)
		}
		return got.Content
	}
	first := set(0)
	if got := parse(first); got != "t0" {
		t.Fatalf("first parse: %q", got)
	}
	if got := parse(first); got != "t0" || c.Registrations() != 1 {
		t.Fatalf("second parse: %q after %d registrations, want 1", got, c.Registrations())
	}
	// More sets than a plugin keeps (1024): the first is dropped.
	const sets = 1100
	for i := 1; i < sets; i++ {
		if got, want := parse(set(i)), fmt.Sprintf("t%d", i); got != want {
			t.Fatalf("parse of set %d: %q", i, got)
		}
	}
	if n := c.Registrations(); n != sets {
		t.Fatalf("%d registrations for %d sets", n, sets)
	}
	if got := parse(first); got != "t0" {
		t.Fatalf("parse of the dropped set: %q", got)
	}
	if n := c.Registrations(); n != sets+1 {
		t.Fatalf("%d registrations; want the dropped set sent once more (%d)", n, sets+1)
	}
}
