package qwen3coder

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/agentenv/agentenv/plugins/toolformattest"
)

// words make reasoning and content: no tag in them.
var words = []string{"a", "Z", " ", "\n", "Paris", "{", "}", "\"", "é", "<", ">", "tool", "call", "/", "function"}

// values are what a model writes for a parameter: good, bad and odd
// values for the typed toolset, none holding a tag.
var values = []string{"Paris", "42", "twelve", "None", "null", "true", "yes", "2.5", "1e400", "nan",
	`{"a": 1}`, `{"a": NaN}`, "{1, 2}", "[1, 2]", "", "multi\nline", strings.Repeat("7", 4301)}

var names = []string{"typed", "typed", "get_weather", "unknown", "", "get weather"}

var params = []string{"s", "i", "n", "b", "o", "a", "l", "d", "x", "hours", "city"}

// randFunction writes one <function=...> with its parameters, sometimes
// with a tag missing.
func randFunction(r *rand.Rand) string {
	var b strings.Builder
	b.WriteString("<function=" + names[r.IntN(len(names))])
	if r.IntN(10) > 0 {
		b.WriteString(">")
	}
	for range r.IntN(4) {
		b.WriteString("\n<parameter=" + params[r.IntN(len(params))])
		if r.IntN(12) > 0 {
			b.WriteString(">")
		}
		b.WriteString("\n" + values[r.IntN(len(values))] + "\n")
		if r.IntN(8) > 0 {
			b.WriteString("</parameter>")
		}
	}
	if r.IntN(6) > 0 {
		b.WriteString("\n</function>")
	}
	return b.String()
}

// randCalls writes the calls after the reasoning and counts the
// functions and function-less blocks in them. With open reasoning the
// first must be a <tool_call>, where the content starts.
func randCalls(r *rand.Rand, open bool) ([]string, int) {
	var out []string
	count, closed := 0, true
	for i := range r.IntN(4) {
		switch k := r.IntN(8); {
		case k == 0 && !(open && i == 0): // bare, outside any block
			out = append(out, randFunction(r))
			count++
		case k == 1 && closed: // the other format's call: a block with no function
			// (after an unclosed block it is part of that block, and
			// holds no function to lose: see docs/tool-formats.md)
			out = append(out, "<tool_call>\n{\"name\": \"typed\", \"arguments\": {}}\n</tool_call>")
			count++
		default:
			var b strings.Builder
			b.WriteString("<tool_call>\n")
			for j := range 1 + r.IntN(2) {
				if j > 0 {
					b.WriteString("\n")
				}
				b.WriteString(randFunction(r))
				count++
			}
			closed = r.IntN(6) > 0
			if closed {
				b.WriteString("\n</tool_call>")
			}
			out = append(out, b.String())
		}
	}
	return out, count
}

// TestNoCallLost: over generated replies, every <function=...> written
// outside the reasoning, and every <tool_call> block with none, is a call
// or unparsed. The generator counts what it wrote.
func TestNoCallLost(t *testing.T) {
	tools := typedTools(t)
	toolformattest.NoCallLost(t, newParser, func(r *rand.Rand) toolformattest.Written {
		var before []string
		for range r.IntN(2) {
			if r.IntN(2) == 0 {
				before = append(before, "<tool_call>\n<function=typed>\n<parameter=s>\nx\n</parameter>\n</function>\n</tool_call>")
			} else {
				before = append(before, "<function=typed>\n</function>")
			}
		}
		l := toolformattest.RandLayout(r, before, nil, words)
		var count int
		l.Calls, count = randCalls(r, l.Think == toolformattest.ThinkOpen)
		if l.Think == toolformattest.ThinkOpen && len(l.Calls) == 0 {
			l.Content = "" // no <tool_call>: all reasoning
		}
		if (l.Think == toolformattest.ThinkClosed || l.Think == toolformattest.ThinkPrompt) && r.IntN(3) == 0 {
			l.Reasoning += "<tool_call>\n" + randFunction(r) + "\n</tool_call>" // not a call
		}
		return toolformattest.Written{Reply: l.Reply(), Tools: tools, Calls: count + len(l.Before)}
	}, 3000)
}
