package qwen3coder

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agentenv/agentenv/plugins/toolformattest"
	"github.com/agentenv/agentenv/sdk/toolformat"
)

// hostileReplies are seeds built to find slow paths: a parser that is
// quadratic in any of them takes minutes instead of milliseconds.
var hostileReplies = []string{
	strings.Repeat("<function=a", 50000),
	strings.Repeat("<function=a><parameter=x>1", 40000),
	strings.Repeat("<function=a>\n<parameter=x>\n<function=", 40000),
	strings.Repeat("<tool_call><function=a><parameter=x>", 40000),
	strings.Repeat("<parameter=x>", 50000),
	strings.Repeat("<tool_call>", 100000),
	strings.Repeat("</function>", 100000),
	strings.Repeat("<function=f>", 50000),
	"<function=typed><parameter=o>" + strings.Repeat("[", 100000),
	"<function=typed><parameter=x>" + strings.Repeat("(", 100000),
	"<function=typed><parameter=x>" + strings.Repeat("-", 100000) + "1",
	"<function=typed><parameter=i>" + strings.Repeat("1_", 100000) + "1",
	strings.Repeat("<function=a", 50000) + "<think>",
	strings.Repeat("<tool_call><function=a>", 50000) + "<think>",
	strings.Repeat("<think>", 50000) + strings.Repeat("</think>", 50000),
}

// typedTools is the golden "typed" toolset: one parameter of each type.
func typedTools(t testing.TB) []toolformat.Tool {
	_, sets := toolformattest.Cases(t, Name)
	return sets["typed"]
}

// checkInvariants holds for every reply: nothing is read from outside the
// reply, a reply with a <tool_call> or <function= gives a call or an
// unparsed call, and every call is a named JSON object.
func checkInvariants(t *testing.T, reply string, p toolformat.Parsed) {
	t.Helper()
	split := toolformat.SplitReply(reply)
	trimmed := split.Before + "\x00" + split.Content // where calls are read
	if !strings.HasPrefix(split.Content, p.Content) {
		t.Fatalf("content %q is not the start of the reply's content %q", p.Content, split.Content)
	}
	opens := strings.Contains(trimmed, blockOpen) || strings.Contains(trimmed, funcOpen)
	if opens != (len(p.Calls)+len(p.Unparsed) > 0) {
		t.Fatalf("reply %q: %d calls and %d unparsed", trimmed, len(p.Calls), len(p.Unparsed))
	}
	for _, c := range p.Calls {
		if c.Name == "" || !utf8.ValidString(c.Name) || !utf8.Valid(c.Arguments) || !toolformattest.IsObject(c.Arguments) {
			t.Fatalf("bad call %q %s from %q", c.Name, c.Arguments, reply)
		}
	}
	for _, u := range p.Unparsed {
		if strings.TrimSpace(u.Reason) == "" || !utf8.ValidString(u.Reason) || !strings.Contains(trimmed, u.Text) {
			t.Fatalf("bad unparsed %+v from %q", u, reply)
		}
	}
}

func TestHostileReplies(t *testing.T) {
	toolformattest.Hostile(t, newParser, hostileReplies, typedTools(t), checkInvariants)
}

// FuzzParse: no panic, no hang, invariants hold, same answer twice. The
// seed corpus (golden replies, hostile replies, testdata/fuzz) runs in
// every `go test`.
func FuzzParse(f *testing.F) {
	toolformattest.Fuzz(f, Name, newParser, hostileReplies, typedTools(f), checkInvariants)
}

// FuzzConvert types any value as each schema type: the result is valid
// JSON or a reason, never both, never a panic.
func FuzzConvert(f *testing.F) {
	// The hand-picked CPython rows (short ones) seed it; the random rows
	// only slow down the fuzzer's baseline.
	for _, r := range loadPyRows(f)[:300] {
		if len(r.In) <= 256 {
			f.Add(r.In)
		}
	}
	types := []string{"string", "integer", "number", "boolean", "object", "array", "null", "any"}
	props := map[string]any{}
	for _, typ := range types {
		props[typ] = map[string]string{"type": typ}
	}
	schema, _ := json.Marshal(map[string]any{"properties": props})
	idx := indexSchema(schema)
	if len(idx) != len(types) {
		f.Fatalf("index of %s = %v", schema, idx)
	}
	f.Fuzz(func(t *testing.T, value string) {
		for _, name := range types {
			out, reason, err := convert(context.Background(), name, value, idx)
			if err != nil || (reason == "") == (out == nil) || (out != nil && !json.Valid(out)) {
				t.Fatalf("convert(%s, %q) = %s, %q", name, value, out, reason)
			}
		}
	})
}
