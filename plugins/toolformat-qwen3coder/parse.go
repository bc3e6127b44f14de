package qwen3coder

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentenv/agentenv/sdk/toolformat"
)

const (
	blockOpen  = "<tool_call>"
	blockClose = "</tool_call>"
	funcOpen   = "<function="
	funcClose  = "</function>"
	paramOpen  = "<parameter="
	paramClose = "</parameter>"
)

// span is a half-open byte range of the reply.
type span struct{ start, end int }

// block is one <tool_call> block: raw is the whole block as written, body
// what vLLM's regex captures inside it.
type block struct{ raw, body span }

// unreadBefore reports each call in the text before <think>, which vLLM
// drops unread: every <tool_call> block and every <function= outside one.
func unreadBefore(before string) []toolformat.Unparsed {
	if !strings.Contains(before, blockOpen) && !strings.Contains(before, funcOpen) {
		return nil
	}
	r := newReader(before, nil, "")
	prevEnd := 0
	for _, b := range findBlocks(before) {
		r.strayFunctions(span{prevEnd, b.raw.start}, toolformat.BeforeThinkReason)
		r.unparsed(b.raw, toolformat.BeforeThinkReason)
		prevEnd = b.raw.end
	}
	r.strayFunctions(span{prevEnd, len(before)}, toolformat.BeforeThinkReason)
	return r.out.Unparsed
}

// parse reads the content of a reply (toolformat.SplitReply). Its error
// is ctx's: a step that ended (cancelled, out of time) stops the reading.
func parse(ctx context.Context, text string, tools []toolformat.Tool) (toolformat.Parsed, error) {
	firstBlock := strings.Index(text, blockOpen)
	firstFunc := strings.Index(text, funcOpen)
	if firstBlock < 0 && firstFunc < 0 {
		return toolformat.Parsed{Content: text}, nil
	}
	// Content is the text before the first <tool_call>, or before the
	// first <function= when there is no <tool_call>; text after is dropped.
	contentEnd := firstBlock
	if contentEnd < 0 {
		contentEnd = firstFunc
	}
	r := newReader(text, tools, text[:contentEnd])
	r.ctx = ctx
	blocks := findBlocks(text)
	if len(blocks) == 0 {
		// vLLM's fallback: with no <tool_call> at all, the whole reply is
		// one block, so a bare <function=...> is still a call.
		r.readFunctions(span{0, len(text)})
		return r.out, r.err
	}
	prevEnd := 0
	for _, b := range blocks {
		if r.stopped() {
			return toolformat.Parsed{}, r.err
		}
		r.strayFunctions(span{prevEnd, b.raw.start}, strayReason)
		if !r.readFunctions(b.body) {
			reason := "the <tool_call> holds no <function=NAME>: write <tool_call>\n<function=NAME>\n<parameter=P>\nvalue\n</parameter>\n</function>\n</tool_call>"
			if strings.HasPrefix(strings.TrimSpace(text[b.body.start:b.body.end]), "{") {
				reason += " (this format does not take JSON calls)"
			}
			r.unparsed(b.raw, reason)
		}
		prevEnd = b.raw.end
	}
	r.strayFunctions(span{prevEnd, len(text)}, strayReason)
	if r.err != nil {
		return toolformat.Parsed{}, r.err
	}
	return r.out, nil
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
	// schemas indexes each called tool's schema once per parse.
	schemas map[string]schemaIndex
	// Cached searches: the scan only moves forward, so each finder reads
	// the reply once and a hostile reply cannot make parsing quadratic.
	funcOpen, funcClose, paramOpen, paramClose finder

	ctx   context.Context // nil: never stopped
	err   error           // ctx's error once it stopped the reading
	steps int
}

// stopped reports whether the step ended; it looks at ctx every few
// hundred calls (a flood of tiny blocks calls it for each).
func (r *reader) stopped() bool {
	if r.err != nil {
		return true
	}
	if r.steps++; r.ctx == nil || r.steps%256 != 0 {
		return false
	}
	if err := r.ctx.Err(); err != nil {
		r.err = fmt.Errorf("reading the reply: %w", err)
	}
	return r.err != nil
}

func newReader(text string, tools []toolformat.Tool, content string) *reader {
	return &reader{
		text: text, tools: tools, out: toolformat.Parsed{Content: content}, schemas: map[string]schemaIndex{},
		funcOpen: newFinder(text, funcOpen), funcClose: newFinder(text, funcClose),
		paramOpen: newFinder(text, paramOpen), paramClose: newFinder(text, paramClose),
	}
}

// finder finds the next occurrence of sub at or after a position,
// remembering its last answer for the next, later position.
type finder struct {
	text, sub string
	from, at  int // the occurrence at or after from is at (-1: none)
}

func newFinder(text, sub string) finder { return finder{text: text, sub: sub, from: -1} }

// next returns the first occurrence at or after pos that starts before
// limit, or -1.
func (f *finder) next(pos, limit int) int {
	if f.from < 0 || pos < f.from || (f.at >= 0 && pos > f.at) {
		f.from, f.at = pos, -1
		if i := strings.Index(f.text[pos:], f.sub); i >= 0 {
			f.at = pos + i
		}
	}
	if f.at < 0 || f.at >= limit {
		return -1
	}
	return f.at
}

func (r *reader) unparsed(s span, reason string) {
	r.out.Unparsed = append(r.out.Unparsed, toolformat.Unparsed{Text: r.text[s.start:s.end], Reason: reason})
}

// strayReason is why a <function= outside the blocks is not read: vLLM
// drops it silently when the reply has blocks.
const strayReason = "this <function=...> is outside <tool_call></tool_call> and was not read: put each call inside <tool_call></tool_call>"

// strayFunctions reports each <function= in gap (text outside the
// <tool_call> blocks) as unparsed with reason.
func (r *reader) strayFunctions(gap span, reason string) {
	for pos := gap.start; ; {
		start := r.funcOpen.next(pos, gap.end)
		if start < 0 || r.stopped() {
			return
		}
		// It runs to its </function>, or up to the next <function= when
		// that comes first, so each stray function is reported on its own.
		end := gap.end
		if j := r.funcOpen.next(start+len(funcOpen), gap.end); j >= 0 {
			end = j
		}
		if j := r.funcClose.next(start, end); j >= 0 {
			end = j + len(funcClose)
		}
		r.unparsed(span{start, end}, reason)
		pos = end
	}
}

// readFunctions reads every function in a block body, as
// `<function=(.*?)</function>|<function=(.*)$` finds them. It reports
// whether the body held any.
func (r *reader) readFunctions(body span) bool {
	found := false
	for pos := body.start; ; {
		start := r.funcOpen.next(pos, body.end)
		if start < 0 || r.stopped() {
			return found
		}
		found = true
		inner := span{start + len(funcOpen), body.end}
		// A function without </function> runs to the block's end, as in vLLM.
		end := body.end
		if j := r.funcClose.next(inner.start, body.end); j >= 0 {
			inner.end, end = j, j+len(funcClose)
		}
		pos = r.readFunction(start, inner, end)
	}
}

// param is one parameter match: absolute offsets into the reply.
type param struct {
	name   span // between "<parameter=" and its '>'
	value  span // after the '>' up to where the match stops
	hasGT  bool
	closed bool // ended by </parameter>
}

// readFunction reads one function whose text after "<function=" is inner
// and that ends at end. It returns where the next search starts: end, or
// an earlier point when another <function= opens before this one closes.
func (r *reader) readFunction(start int, inner span, end int) int {
	split := func(at int) int {
		r.unparsed(span{start, at}, "missing </function>: another <function= starts before this function is closed")
		return at
	}
	whole := span{start, end}
	// The name runs to the first '>'; a <function= before it means this
	// function was never finished.
	nextFunc := r.funcOpen.next(inner.start, inner.end)
	nameLimit := inner.end
	if nextFunc >= 0 {
		nameLimit = nextFunc
	}
	gt := strings.IndexByte(r.text[inner.start:nameLimit], '>')
	if gt < 0 {
		if nextFunc >= 0 {
			return split(nextFunc)
		}
		r.unparsed(whole, "missing '>' after the function name: write <function=NAME>")
		return end
	}
	gt += inner.start
	params, at := r.scanParams(span{gt + 1, inner.end})
	if at >= 0 {
		return split(at)
	}
	name := r.text[inner.start:gt]
	if reason := badName(name); reason != "" {
		r.unparsed(whole, reason)
		return end
	}
	idx, ok := r.schemas[name]
	if !ok {
		idx = indexTools(r.tools, name)
		r.schemas[name] = idx
	}
	args := newArgs()
	var problems []string
	for _, p := range params {
		if !p.hasGT {
			problems = append(problems, "a <parameter=...> is missing '>' after its name: write <parameter=NAME>")
			continue
		}
		pname := r.text[p.name.start:p.name.end]
		if reason := badParamName(pname); reason != "" {
			problems = append(problems, reason)
			continue
		}
		value := r.text[p.value.start:p.value.end]
		value = strings.TrimPrefix(value, "\n")
		value = strings.TrimSuffix(value, "\n")
		v, reason, err := convert(r.ctx, pname, value, idx)
		if err != nil {
			r.err = err
			return end
		}
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

// scanParams finds parameters in s (the text after the function name) as
// `<parameter=(.*?)(?:</parameter>|(?=<parameter=)|(?=</function>)|$)`
// does. It also returns where another function starts inside s (-1 if
// none): a <function= between parameters or inside a parameter that was
// never closed. One inside a closed parameter is part of its value (code
// that mentions the format), as in vLLM.
func (r *reader) scanParams(s span) ([]param, int) {
	// Python's $ also matches before a final newline.
	dollar := s.end
	if s.end > s.start && r.text[s.end-1] == '\n' {
		dollar = s.end - 1
	}
	var out []param
	for pos := s.start; ; {
		open := r.paramOpen.next(pos, s.end)
		gapEnd := s.end
		if open >= 0 {
			gapEnd = open
		}
		if f := r.funcOpen.next(pos, gapEnd); f >= 0 {
			return out, f
		}
		if open < 0 {
			return out, -1
		}
		from := open + len(paramOpen)
		// The lazy group stops at the earliest of the four alternatives.
		stop, consumed := s.end, 0
		if from <= dollar {
			stop = dollar
		}
		if c := r.paramClose.next(from, stop); c >= 0 {
			stop, consumed = c, len(paramClose)
		}
		if o := r.paramOpen.next(from, stop); o >= 0 {
			stop, consumed = o, 0
		}
		if fc := r.funcClose.next(from, stop); fc >= 0 {
			stop, consumed = fc, 0
		}
		p := param{name: span{from, stop}, value: span{stop, stop}, closed: consumed > 0}
		if k := strings.IndexByte(r.text[from:stop], '>'); k >= 0 {
			p.name.end, p.value.start, p.hasGT = from+k, from+k+1, true
		}
		if !p.closed {
			if f := r.funcOpen.next(from, stop); f >= 0 {
				return out, f
			}
		}
		out = append(out, p)
		pos = stop + consumed
	}
}

// badName checks a function name. vLLM takes the text up to the first
// '>' as the name, whatever it is; a name holding '<' or a newline is the
// sign of a missing '>' (the name swallowed what follows it), and an
// empty name calls no tool.
func badName(name string) string {
	if name == "" {
		return "the function name is empty: write <function=NAME>"
	}
	if strings.ContainsAny(name, "<\n") {
		return "missing '>' after the function name: write <function=NAME>"
	}
	return ""
}

// badParamName checks a parameter name as badName does; an empty one is
// read as vLLM reads it (the key "").
func badParamName(name string) string {
	if i := strings.IndexAny(name, "<\n"); i >= 0 {
		return fmt.Sprintf("missing '>' after <parameter=%s: write <parameter=NAME>", name[:i])
	}
	return ""
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
	size := 2
	for i, k := range a.keys {
		size += len(k) + len(a.vals[i]) + 4
	}
	b := make([]byte, 1, size)
	b[0] = '{'
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
