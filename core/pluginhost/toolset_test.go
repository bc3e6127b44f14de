package pluginhost

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentenv/agentenv/sdk/sdktest/wait"

	"github.com/agentenv/agentenv/sdk/toolformat"
)

// toolFormatV builds the test tool-format plugin; a non-empty mark makes
// a copy with other bytes (a changed binary, for hot swaps).
func toolFormatV(t *testing.T, mark string) string {
	t.Helper()
	base := build(t, "toolformatv", "")
	if mark == "" {
		return base
	}
	data, err := os.ReadFile(base)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "toolformatv-"+mark)
	if err := os.WriteFile(out, append(data, "\n"+mark+"\n"...), 0o755); err != nil {
		t.Fatal(err)
	}
	return out
}

func parseContent(t *testing.T, ctx context.Context, p toolformat.Parser, text string, set *toolformat.ToolSet) string {
	t.Helper()
	got, err := toolformat.ParseWith(ctx, p, text, set)
	if err != nil {
		t.Fatalf("parse %q: %v", text, err)
	}
	return got.Content
}

// A turn's tools reach a tool-format plugin process once per tool set:
// parses after the first name the set by id. A process that replaces the
// one holding the set (a crash restart, a hot swap) is sent it again on
// its first parse, and the caller sees no difference.
func TestToolSetSentOncePerProcess(t *testing.T) {
	dir := t.TempDir()
	install(t, toolFormatV(t, ""), dir, "agentenv-toolformat-v")
	h := newHost(t, dir, nil)
	ctx := ctxTimeout(t, time.Minute)
	p, err := h.ToolFormat(ctx, "v", nil)
	if err != nil {
		t.Fatal(err)
	}
	tool := func(name string) toolformat.Tool {
		return toolformat.Tool{Name: name, Description: "the " + name + " tool", Parameters: json.RawMessage(`{"type":"object"}`)}
	}
	setA := toolformat.NewToolSet([]toolformat.Tool{tool("a"), tool("b")})
	setB := toolformat.NewToolSet([]toolformat.Tool{tool("c")})
	// The same tools made into a set again (the next episode's turn) are
	// the same set.
	setA2 := toolformat.NewToolSet([]toolformat.Tool{tool("a"), tool("b")})
	if setA.ID() != setA2.ID() || setA.ID() == setB.ID() || setA.ID() == "" {
		t.Fatalf("ids: %q %q %q", setA.ID(), setA2.ID(), setB.ID())
	}
	steps := []struct {
		set  *toolformat.ToolSet
		want string
	}{
		{setA, "sets=1 tools=a,b"},
		{setA, "sets=1 tools=a,b"},
		{setA2, "sets=1 tools=a,b"},
		{setB, "sets=2 tools=c"},
		{setA, "sets=2 tools=a,b"},
		{toolformat.NewToolSet(nil), "sets=2 tools="},
	}
	for i, s := range steps {
		if got := parseContent(t, ctx, p, "reply", s.set); got != s.want {
			t.Fatalf("parse %d: %q, want %q", i, got, s.want)
		}
	}
	// Parse with a plain tool list is the same set.
	if got, err := p.Parse(ctx, "reply", setB.Tools()); err != nil || got.Content != "sets=2 tools=c" {
		t.Fatalf("Parse(tools) = %q, %v", got.Content, err)
	}

	pid := func() int {
		n, err := strconv.Atoi(parseContent(t, ctx, p, "pid", setA))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	first := pid()
	if err := syscall.Kill(first, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	wait.Until(t, "the watcher to restart the killed plugin", func() bool { return h.Restarts() > 0 })
	if got := parseContent(t, ctx, p, "reply", setA); got != "sets=1 tools=a,b" {
		t.Fatalf("first parse after the restart: %q, want the set sent to the new process once", got)
	}
	restarted := pid()
	if restarted == first {
		t.Fatalf("same pid %d after the kill", first)
	}
	if got := parseContent(t, ctx, p, "reply", setA); got != "sets=1 tools=a,b" {
		t.Fatalf("second parse after the restart: %q", got)
	}

	// A hot swap to a changed binary: the new process is sent the set too.
	install(t, toolFormatV(t, "swapped"), dir, "agentenv-toolformat-v")
	if err := h.Reload(); err != nil {
		t.Fatal(err)
	}
	swapped := pid()
	if swapped == restarted {
		t.Fatalf("same pid %d after the swap", swapped)
	}
	for range 2 {
		if got := parseContent(t, ctx, p, "reply", setA); got != "sets=1 tools=a,b" {
			t.Fatalf("parse after the swap: %q, want the set sent to the new process once", got)
		}
	}
}

// A tool-format plugin built against the SDK before tool sets (protocol
// 2) is refused when started, with its name, its version and protocol,
// the protocol needed and what to do.
func TestOldProtocolToolFormatRefused(t *testing.T) {
	dir := t.TempDir()
	install(t, toolFormatV(t, ""), dir, "agentenv-toolformat-oldproto")
	h := newHost(t, dir, nil)
	ctx := ctxTimeout(t, time.Minute)
	_, err := h.ToolFormat(ctx, "oldproto", nil)
	if err == nil {
		t.Fatal("a protocol 2 tool-format plugin was started")
	}
	for _, want := range []string{
		"toolformat-oldproto",
		`toolformat plugin "oldproto" (version v0.9.0) speaks plugin protocol 2`,
		"needs protocol 3 for toolformat plugins",
		"rebuild the plugin against the current agentenv sdk/",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q\nlacks %q", err, want)
		}
	}
	entries, err := h.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].OK() || !strings.Contains(entries[0].Status, "speaks plugin protocol 2") {
		t.Fatalf("List = %+v, want the plugin failed with the protocol refusal", entries)
	}
}
