package hermes

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"

	"github.com/agentenv/agentenv/plugins/toolformattest"
)

// vllmBlocks is vLLM's own block regex: the blocks a reply holds, found
// independently of parse.
var vllmBlocks = regexp.MustCompile(`(?s)<tool_call>.*?</tool_call>|<tool_call>.*`)

// words make reasoning and content: no tag in them.
var words = []string{"a", "Z", " ", "\n", "Paris", "{", "}", "\"", "é", "<", ">", "tool", "call", "/", "think"}

// bodies are what a model writes inside <tool_call>: calls, broken calls
// and things that are not calls.
var bodies = []string{
	`{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}`,
	`{"name": "search", "arguments": {}}`,
	`{"name": "search", "arguments": {"q": "x"}, "id": NaN}`,
	`{"name": "search", "arguments": "{\"q\": \"x\"}"}`,
	`{"name": "search", "arguments": {"n": NaN}}`,
	`{"name": "search", "arguments": {"n": 1e400}}`,
	`{"name": "search", "arguments": {"n": ` + strings.Repeat("9", 4301) + `}}`,
	`{"name": "", "arguments": {}}`,
	`{"name": 5, "arguments": {}}`,
	`{"arguments": {}}`,
	`{"name": "search", "parameters": {}}`,
	`[{"name": "search", "arguments": {}}]`,
	`{"name": "search", "arguments": {"q": "x"}`,
	`{"name": "search", "arguments": {"q": "line` + "\n" + `"}}`,
	"", "  ", `<function=search>`,
}

func randBlock(r *rand.Rand) string {
	body := bodies[r.IntN(len(bodies))]
	if r.IntN(6) == 0 { // cut off
		body = body[:r.IntN(len(body)+1)]
	}
	closing := "\n</tool_call>"
	if r.IntN(5) == 0 { // not closed: runs into the next block
		closing = ""
	}
	return "<tool_call>\n" + body + closing
}

// TestNoCallLost: over generated replies, every <tool_call> block outside
// the reasoning (before <think>, or in the content) is a call or
// unparsed. The blocks are counted with vLLM's regex over the parts the
// generator wrote, not with the parser's own code.
func TestNoCallLost(t *testing.T) {
	toolformattest.NoCallLost(t, newParser, func(r *rand.Rand) toolformattest.Written {
		var before, calls []string
		for range r.IntN(2) {
			before = append(before, "<tool_call>\n"+bodies[r.IntN(len(bodies))]+"\n</tool_call>")
		}
		for range r.IntN(4) {
			calls = append(calls, randBlock(r))
		}
		l := toolformattest.RandLayout(r, before, calls, words)
		if (l.Think == toolformattest.ThinkClosed || l.Think == toolformattest.ThinkPrompt) && r.IntN(3) == 0 {
			l.Reasoning += randBlock(r) + "\n</tool_call>" // a call inside the reasoning is not a call
		}
		written := len(vllmBlocks.FindAllStringIndex(strings.Join(l.Before, "\n"), -1)) +
			len(vllmBlocks.FindAllStringIndex(l.Content+strings.Join(l.Calls, "\n"), -1))
		return toolformattest.Written{Reply: l.Reply(), Calls: written}
	}, 3000)
}
