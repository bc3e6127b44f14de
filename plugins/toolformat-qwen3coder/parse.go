package qwen3coder

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentenv/agentenv/sdk/toolformat"
)

const (
	blockOpen   = "<tool_call>"
	blockClose  = "</tool_call>"
	funcOpen    = "<function="
	funcClose   = "</function>"
	paramOpen   = "<parameter="
	paramClose  = "</parameter>"
	badNameRune = "{}<>\"' \t\n\r"
)

// span is a half-open byte range of the reply.
type span struct{ start, end int }

// block is one <tool_call> block: raw is the whole block as written, body
// what vLLM's regex captures inside it.
type block struct{ raw, body span }

// parse reads a reply that TrimReply has already cleaned.
func parse(text string, tools []toolformat.Tool) toolformat.Parsed {
	firstBlock := strings.Index(text, blockOpen)
	firstFunc := strings.Index(text, funcOpen)
	if firstBlock < 0 && firstFunc < 0 {
		return toolformat.Parsed{Content: text}
	}
	// Content is the text before the first <tool_call>, or before the
	// first <function= when there is no <tool_call>; text after is dropped.
	contentEnd := firstBlock
	if contentEnd < 0 {
		contentEnd = firstFunc
	}
	r := reader{text: text, tools: tools, out: toolformat.Parsed{Content: text[:contentEnd]}}
	blocks := findBlocks(text)
	if len(blocks) == 0 {
		// vLLM's fallback: with no <tool_call> at all, the whole reply is
		// one block, so a bare <function=...> is still a call.
		r.readFunctions(span{0, len(text)})
		return r.out
	}
	prevEnd := 0
	for _, b := range blocks {
		r.strayFunctions(span{prevEnd, b.raw.start})
		if !r.readFunctions(b.body) {
			reason := "the <tool_call> holds no <function=NAME>: write <tool_call>\n<function=NAME>\n<parameter=P>\nvalue\n</parameter>\n</function>\n</tool_call>"
			if strings.HasPrefix(strings.TrimSpace(text[b.body.start:b.body.end]), "{") {
				reason += " (this format does not take JSON calls)"
			}
			r.unparsed(b.raw, reason)
		}
		prevEnd = b.raw.end
	}
	r.strayFunctions(span{prevEnd, len(text)})
	return r.out
}

// findBlocks finds blocks as `<tool_call>(.*?)</tool_call>|<tool_call>(.*?)$`
// (Python, DOTALL) does: each runs to the next </tool_call>; a last one
// without it runs to the end, where Python's $ also matches before a
// final newline, so that newline is not in the body.
func findBlocks(text string) []block {
	var blocks []block
	for pos := 0; ; {
		i := strings.Index(text[pos:], blockOpen)
		if i < 0 {
			return blocks
		}
		start := pos + i
		bodyStart := start + len(blockOpen)
		if j := strings.Index(text[bodyStart:], blockClose); j >= 0 {
			end := bodyStart + j + len(blockClose)
			blocks = append(blocks, block{raw: span{start, end}, body: span{bodyStart, bodyStart + j}})
			pos = end
			continue
		}
		bodyEnd := len(text)
		if bodyEnd > bodyStart && text[bodyEnd-1] == '\n' {
			bodyEnd--
		}
		return append(blocks, block{raw: span{start, len(text)}, body: span{bodyStart, bodyEnd}})
	}
}

type reader struct {
	text  string
	tools []toolformat.Tool
	out   toolformat.Parsed
}

func (r *reader) unparsed(s span, reason string) {
	r.out.Unparsed = append(r.out.Unparsed, toolformat.Unparsed{Text: r.text[s.start:s.end], Reason: reason})
}

// strayFunctions reports each <function= outside the <tool_call> blocks.
// vLLM drops them silently when the reply has blocks.
func (r *reader) strayFunctions(gap span) {
	for pos := gap.start; ; {
		i := strings.Index(r.text[pos:gap.end], funcOpen)
		if i < 0 {
			return
		}
		start := pos + i
		end := gap.end
		if j := strings.Index(r.text[start:gap.end], funcClose); j >= 0 {
			end = start + j + len(funcClose)
		}
		r.unparsed(span{start, end}, "this <function=...> is outside <tool_call></tool_call> and was not read: put each call inside <tool_call></tool_call>")
		pos = end
	}
}

// readFunctions reads every function in a block body, as
// `<function=(.*?)</function>|<function=(.*)$` finds them. It reports
// whether the body held any.
func (r *reader) readFunctions(body span) bool {
	found := false
	for pos := body.start; ; {
		i := strings.Index(r.text[pos:body.end], funcOpen)
		if i < 0 {
			return found
		}
		found = true
		start := pos + i
		inner := span{start + len(funcOpen), body.end}
		// A function without </function> runs to the block's end, as in vLLM.
		end := body.end
		if j := strings.Index(r.text[inner.start:body.end], funcClose); j >= 0 {
			inner.end = inner.start + j
			end = inner.end + len(funcClose)
		}
		pos = r.readFunction(start, inner, end)
	}
}

// readFunction reads one function whose text after "<function=" is inner
// and that ends at end. It returns where the next search starts: end, or
// an earlier point when another <function= opens before this one closes.
func (r *reader) readFunction(start int, inner span, end int) int {
	t := r.text[inner.start:inner.end]
	params := scanParams(t)
	if split := nextFunction(t, params); split >= 0 {
		r.unparsed(span{start, inner.start + split}, "missing </function>: another <function= starts before this function is closed")
		return inner.start + split
	}
	whole := span{start, end}
	gt := strings.IndexByte(t, '>')
	if gt < 0 {
		r.unparsed(whole, "missing '>' after the function name: write <function=NAME>")
		return end
	}
	name := t[:gt]
	if reason := badName(name, "function"); reason != "" {
		r.unparsed(whole, reason)
		return end
	}
	props := properties(r.tools, name)
	args := newArgs()
	var problems []string
	for _, p := range params {
		if p.name < 0 {
			problems = append(problems, "a <parameter=...> is missing '>' after its name: write <parameter=NAME>")
			continue
		}
		pname := t[p.nameStart:p.name]
		if reason := badParamName(pname); reason != "" {
			problems = append(problems, reason)
			continue
		}
		value := t[p.name+1 : p.valueEnd]
		value = strings.TrimPrefix(value, "\n")
		value = strings.TrimSuffix(value, "\n")
		v, reason := convert(pname, value, props)
		if reason != "" {
			problems = append(problems, reason)
			continue
		}
		args.set(pname, v)
	}
	if len(problems) > 0 {
		r.unparsed(whole, strings.Join(problems, "; "))
		return end
	}
	r.out.Calls = append(r.out.Calls, toolformat.Call{Name: name, Arguments: args.json()})
	return end
}

func badName(name, what string) string {
	if name == "" {
		return fmt.Sprintf("the %s name is empty: write <function=NAME>", what)
	}
	if strings.ContainsAny(name, "<\n") {
		return "missing '>' after the function name: write <function=NAME>"
	}
	if strings.ContainsAny(name, badNameRune) {
		return fmt.Sprintf("invalid function name %q: a name has no spaces, quotes, braces or angle brackets", name)
	}
	return ""
}

func badParamName(name string) string {
	if name == "" {
		return "a <parameter=> has no name: write <parameter=NAME>"
	}
	if strings.ContainsAny(name, "<\n") {
		return fmt.Sprintf("missing '>' after <parameter=%s: write <parameter=NAME>", firstLine(name))
	}
	return ""
}

func firstLine(s string) string {
	if i := strings.IndexAny(s, "<\n"); i >= 0 {
		return s[:i]
	}
	return s
}

// param is one parameter match inside a function's text (offsets are
// relative to the text after "<function=").
type param struct {
	start     int  // at "<parameter="
	nameStart int  // just after "<parameter="
	name      int  // the '>' that ends the name, or -1
	valueEnd  int  // where the value ends
	end       int  // where the match ends (after </parameter> if closed)
	closed    bool // ended by </parameter>
}

// scanParams finds parameters as
// `<parameter=(.*?)(?:</parameter>|(?=<parameter=)|(?=</function>)|$)`
// does over the text after the function name. It scans from the start of
// t; a match before the name's '>' cannot happen for a well-formed name
// and is reported through the name checks.
func scanParams(t string) []param {
	gt := strings.IndexByte(t, '>')
	if gt < 0 {
		return nil
	}
	base := gt + 1
	s := t[base:]
	var out []param
	for pos := 0; ; {
		i := strings.Index(s[pos:], paramOpen)
		if i < 0 {
			return out
		}
		p := param{start: base + pos + i, nameStart: base + pos + i + len(paramOpen)}
		from := pos + i + len(paramOpen)
		// The earliest of the four alternatives wins (the group is lazy).
		stop, consumed := len(s), 0
		if len(s) > from && s[len(s)-1] == '\n' {
			stop = len(s) - 1 // Python's $ matches before a final newline
		}
		if j := strings.Index(s[from:], paramClose); j >= 0 && from+j < stop {
			stop, consumed = from+j, len(paramClose)
		}
		if j := strings.Index(s[from:], paramOpen); j >= 0 && from+j < stop {
			stop, consumed = from+j, 0
		}
		if j := strings.Index(s[from:], funcClose); j >= 0 && from+j < stop {
			stop, consumed = from+j, 0
		}
		p.valueEnd = base + stop
		p.end = base + stop + consumed
		p.closed = consumed > 0
		p.name = -1
		if k := strings.IndexByte(s[from:stop], '>'); k >= 0 {
			p.name = base + from + k
		}
		out = append(out, p)
		pos = stop + consumed
	}
}

// nextFunction returns the offset in t of a <function= that starts a new
// function: one in the name or between parameters, or inside a parameter
// that was never closed. A <function= inside a closed parameter is part of
// its value (code that mentions the format), as in vLLM. -1 if none.
func nextFunction(t string, params []param) int {
	for pos := 0; ; {
		i := strings.Index(t[pos:], funcOpen)
		if i < 0 {
			return -1
		}
		at := pos + i
		inside := false
		for _, p := range params {
			if p.closed && p.name >= 0 && at > p.name && at < p.valueEnd {
				inside = true
				break
			}
		}
		if !inside {
			return at
		}
		pos = at + len(funcOpen)
	}
}

// args is an arguments object that keeps first-insertion order and lets a
// repeated parameter overwrite the earlier value, like a Python dict.
type args struct {
	keys  []string
	vals  []json.RawMessage
	index map[string]int
}

func newArgs() *args { return &args{index: map[string]int{}} }

func (a *args) set(k string, v json.RawMessage) {
	if i, ok := a.index[k]; ok {
		a.vals[i] = v
		return
	}
	a.index[k] = len(a.keys)
	a.keys = append(a.keys, k)
	a.vals = append(a.vals, v)
}

func (a *args) json() json.RawMessage {
	b := []byte{'{'}
	for i, k := range a.keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, k)
		b = append(b, ':')
		b = append(b, a.vals[i]...)
	}
	return append(b, '}')
}
