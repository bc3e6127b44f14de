package hermes

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agentenv/agentenv/plugins/toolformattest"
	"github.com/agentenv/agentenv/sdk/toolformat"
)

// hostileReplies are seeds built to find slow paths: a parser that is
// quadratic in any of them takes minutes instead of milliseconds.
var hostileReplies = []string{
	strings.Repeat("<tool_call>", 100000),
	strings.Repeat("</tool_call>", 100000),
	strings.Repeat("<tool_call>{", 50000),
	strings.Repeat(`<tool_call>{"name": "f", "arguments": {}}</tool_call>`, 20000),
	"<tool_call>" + strings.Repeat("[", 100000),
	"<tool_call>" + strings.Repeat(`{"a":`, 50000),
	strings.Repeat("<tool_call>{\"name\": \"f\", \"arguments\": {}}", 20000) + "<think>",
	"<tool_call>{\"n\": [" + strings.Repeat("NaN, 1e400, ", 50000) + "0]}",
	strings.Repeat("<think>", 50000) + strings.Repeat("</think>", 50000),
	strings.Repeat("<|im_end|>", 50000),
	strings.Repeat(" <|im_end|>\n", 50000),
}

// checkInvariants holds for every reply: nothing is read from outside the
// reply, every <tool_call> block is either a call or unparsed with a
// reason, and every call is a named JSON object.
func checkInvariants(t *testing.T, reply string, p toolformat.Parsed) {
	t.Helper()
	split := toolformat.SplitReply(reply)
	trimmed := split.Before + "\x00" + split.Content // where calls are read
	if !strings.HasPrefix(split.Content, p.Content) {
		t.Fatalf("content %q is not the start of the reply's content %q", p.Content, split.Content)
	}
	if strings.Contains(trimmed, openTag) != (len(p.Calls)+len(p.Unparsed) > 0) {
		t.Fatalf("reply %q: %d calls and %d unparsed; a <tool_call> must give one or the other", trimmed, len(p.Calls), len(p.Unparsed))
	}
	for _, c := range p.Calls {
		if c.Name == "" || !utf8.ValidString(c.Name) || !toolformattest.IsObject(c.Arguments) {
			t.Fatalf("bad call %q %s from %q", c.Name, c.Arguments, reply)
		}
	}
	for _, u := range p.Unparsed {
		if strings.TrimSpace(u.Reason) == "" || !utf8.ValidString(u.Reason) || !strings.Contains(trimmed, u.Text) || !strings.HasPrefix(u.Text, openTag) {
			t.Fatalf("bad unparsed %+v from %q", u, reply)
		}
	}
}

func TestHostileReplies(t *testing.T) {
	toolformattest.Hostile(t, newParser, hostileReplies, nil, checkInvariants)
}

// FuzzParse: no panic, no hang, invariants hold, same answer twice. The
// seed corpus (golden replies, hostile replies, testdata/fuzz) runs in
// every `go test`.
func FuzzParse(f *testing.F) {
	toolformattest.Fuzz(f, Name, newParser, hostileReplies, nil, checkInvariants)
}
