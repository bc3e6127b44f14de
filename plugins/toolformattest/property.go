package toolformattest

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/agentenv/agentenv/sdk/toolformat"
)

// Layout is a reply laid out as a model may write it: calls before
// <think> (which vLLM drops), reasoning closed, opened in the prompt or
// left open, content, calls, an end token. Before and Calls hold call
// blocks as the format writes them; Reasoning and Content must hold no
// think tag.
type Layout struct {
	Before    []string // call blocks before <think>; only with Think set
	Think     Think
	Reasoning string
	Content   string
	Calls     []string
	End       string
}

// Think is how a reply's reasoning is written.
type Think int

const (
	NoThink     Think = iota // no reasoning
	ThinkClosed              // <think>...</think>
	ThinkPrompt              // ...</think>: the <think> was in the prompt
	ThinkOpen                // <think>... with no </think>: reasoning ends at the first <tool_call>
)

// RandLayout draws a layout around the given blocks (before and after the
// reasoning); reasoning and content are drawn from words.
func RandLayout(r *rand.Rand, before, calls []string, words []string) Layout {
	l := Layout{Think: Think(r.IntN(4)), Calls: calls, End: []string{"", "<|im_end|>", "<|im_end|>\n", "<|endoftext|>"}[r.IntN(4)]}
	if l.Think != NoThink {
		l.Reasoning = RandString(r, words)
	}
	if l.Think == ThinkClosed || l.Think == ThinkOpen {
		l.Before = before
	}
	if l.Think != ThinkOpen { // open reasoning ends at the first <tool_call>: no content before it
		l.Content = RandString(r, words)
	}
	return l
}

// Reply renders the layout.
func (l Layout) Reply() string {
	var b strings.Builder
	b.WriteString(strings.Join(l.Before, "\n"))
	switch l.Think {
	case ThinkClosed:
		b.WriteString("<think>\n" + l.Reasoning + "\n</think>\n\n")
	case ThinkPrompt:
		b.WriteString(l.Reasoning + "\n</think>\n\n")
	case ThinkOpen:
		b.WriteString("<think>\n" + l.Reasoning + "\n")
	}
	b.WriteString(l.Content)
	b.WriteString(strings.Join(l.Calls, "\n"))
	b.WriteString(l.End)
	return b.String()
}

// Written is a generated reply with the number of call blocks written
// outside its reasoning.
type Written struct {
	Reply string
	Tools []toolformat.Tool
	Calls int
}

// NoCallLost parses n generated replies and checks that every call block
// written outside the reasoning comes back, as a call or as unparsed with
// its reason: none is lost silently.
func NoCallLost(t *testing.T, newParser func() toolformat.Parser, gen func(r *rand.Rand) Written, n int) {
	t.Helper()
	calls, unparsed := 0, 0
	for seed := range n {
		r := rand.New(rand.NewPCG(uint64(seed), 10))
		w := gen(r)
		p, err := newParser().Parse(context.Background(), w.Reply, w.Tools)
		if err != nil {
			t.Fatal(err)
		}
		if got := len(p.Calls) + len(p.Unparsed); got != w.Calls {
			t.Fatalf("seed %d: reply %q\nwrote %d calls, read %d calls and %d unparsed: %+v", seed, w.Reply, w.Calls, len(p.Calls), len(p.Unparsed), p)
		}
		calls, unparsed = calls+len(p.Calls), unparsed+len(p.Unparsed)
	}
	// The generator must exercise both outcomes, or the test proves little.
	if calls == 0 || unparsed == 0 {
		t.Fatalf("%d replies gave %d calls and %d unparsed: the generator must produce both", n, calls, unparsed)
	}
}
