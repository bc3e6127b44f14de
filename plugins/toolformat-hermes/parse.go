package hermes

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/agentenv/agentenv/sdk/toolformat"
	"github.com/agentenv/agentenv/sdk/toolformat/jsonscan"
)

const (
	openTag  = "<tool_call>"
	closeTag = "</tool_call>"
	// jsonSpace is what Python's json.loads skips around a value.
	jsonSpace = " \t\n\r"
	// nearRadius is how much text a reason quotes on each side of an error.
	nearRadius = 24
)

// block is one <tool_call> block: [start, end) in the text, and its body.
type block struct {
	start, end int
	body       string
	closed     bool // ended by </tool_call>
}

// blocks calls fn with each block in text, found as vLLM's regex
// `<tool_call>(.*?)</tool_call>|<tool_call>(.*)` finds them: each runs to
// the first </tool_call> after it, and a last block with no </tool_call>
// runs to the end of the text.
func blocks(text string, fn func(block)) {
	for pos := 0; ; {
		i := strings.Index(text[pos:], openTag)
		if i < 0 {
			return
		}
		b := block{start: pos + i, end: len(text)}
		bodyStart := b.start + len(openTag)
		b.body = text[bodyStart:]
		if j := strings.Index(b.body, closeTag); j >= 0 {
			b.body, b.end, b.closed = b.body[:j], bodyStart+j+len(closeTag), true
		}
		fn(b)
		pos = b.end
	}
}

// parse reads the content of a reply (toolformat.SplitReply). Its error
// is ctx's: a step that ended stops the reading (looked at every few
// hundred blocks).
func parse(ctx context.Context, text string) (toolformat.Parsed, error) {
	first := strings.Index(text, openTag)
	if first < 0 {
		return toolformat.Parsed{Content: text}, nil
	}
	// Like vLLM, content is the text before the first call; text between
	// and after calls is dropped.
	out := toolformat.Parsed{Content: text[:first]}
	var err error
	n := 0
	blocks(text, func(b block) {
		if n++; n%256 == 0 && err == nil {
			err = ctx.Err()
		}
		if err != nil {
			return
		}
		call, reason := readCall(b.body, b.closed)
		if reason == "" {
			out.Calls = append(out.Calls, call)
		} else {
			out.Unparsed = append(out.Unparsed, toolformat.Unparsed{Text: text[b.start:b.end], Reason: reason})
		}
	})
	if err != nil {
		return toolformat.Parsed{}, fmt.Errorf("reading the reply: %w", err)
	}
	return out, nil
}

// unreadBefore reports each block in the text before <think>, which vLLM
// drops unread.
func unreadBefore(before string) []toolformat.Unparsed {
	var out []toolformat.Unparsed
	blocks(before, func(b block) {
		out = append(out, toolformat.Unparsed{Text: before[b.start:b.end], Reason: toolformat.BeforeThinkReason})
	})
	return out
}

// readCall reads one block's body as vLLM does: Python's json.loads of
// the body, then "name" and "arguments". It returns the call, or the
// reason the block is not one; offsets in reasons count bytes from the
// <tool_call>.
func readCall(body string, closed bool) (toolformat.Call, string) {
	unclosed := ""
	if !closed {
		unclosed = " (the call has no </tool_call>; was the reply cut off?)"
	}
	if strings.Trim(body, jsonSpace) == "" {
		return toolformat.Call{}, `empty <tool_call>: write {"name": "TOOL", "arguments": {...}} inside it` + unclosed
	}
	raw := []byte(body)
	// Python's json reads NaN and Infinity; mask them so that Go's json.Valid
	// checks the rest of Python's grammar.
	if masked := jsonscan.MaskNonFinite(raw); !json.Valid(masked) {
		var v any
		return toolformat.Call{}, jsonReason(body, len(openTag), json.Unmarshal(masked, &v)) + unclosed
	}
	if reason := bigInteger(raw); reason != "" {
		return toolformat.Call{}, reason
	}
	fields, kind := objectFields(raw)
	if kind != "object" {
		return toolformat.Call{}, fmt.Sprintf(`the tool call must be a JSON object {"name": ..., "arguments": {...}}, got %s`, article(kind))
	}

	rawName := fields.name
	if rawName == nil {
		return toolformat.Call{}, `the tool call has no "name": write {"name": "TOOL", "arguments": {...}}`
	}
	var name string
	if kindOf(rawName) != "string" || json.Unmarshal(rawName, &name) != nil {
		return toolformat.Call{}, fmt.Sprintf(`"name" must be a string, got %s`, article(kindOf(rawName)))
	}
	if name == "" {
		return toolformat.Call{}, `"name" is empty: write the name of the tool to call`
	}

	args := fields.arguments
	if args == nil {
		hint := `; write "arguments": {} for a tool that takes none`
		if fields.hasParameters {
			hint = `; the key is "arguments", not "parameters"`
		}
		return toolformat.Call{}, fmt.Sprintf(`call to %q has no "arguments"%s`, name, hint)
	}
	switch k := kindOf(args); k {
	case "object":
	case "string":
		// vLLM passes a string on as a string: the tool gets text, not
		// arguments.
		return toolformat.Call{}, fmt.Sprintf(`call to %q: "arguments" is a string; write the arguments as a JSON object, not as a string holding one`, name)
	default:
		return toolformat.Call{}, fmt.Sprintf(`call to %q: "arguments" must be a JSON object, got %s`, name, article(k))
	}
	if reason := nonFinite(args); reason != "" {
		return toolformat.Call{}, fmt.Sprintf(`call to %q: "arguments" %s`, name, reason)
	}
	// The arguments go on as the model wrote them (whitespace and all):
	// valid JSON, with the values vLLM's json.dumps writes.
	return toolformat.Call{Name: name, Arguments: args}, ""
}

// bigInteger names an integer anywhere in the call that Python's json
// refuses: vLLM then reads no call in the reply at all.
func bigInteger(raw []byte) string {
	n, ok := jsonscan.FirstOdd(raw, jsonscan.LongInteger)
	if !ok {
		return ""
	}
	digits := len(bytes.TrimPrefix(raw[n.Start:n.End], []byte("-")))
	return fmt.Sprintf("the call holds an integer of %d digits, more than the %d that Python's json reads; write it as a string", digits, jsonscan.MaxIntDigits)
}

// nonFinite names a NaN, an Infinity or a number too large for a double in
// the arguments: Python reads them, and vLLM's json.dumps then writes NaN
// or Infinity, which is not JSON.
func nonFinite(args []byte) string {
	n, ok := jsonscan.FirstOdd(args, jsonscan.NonFiniteValue)
	switch {
	case !ok:
		return ""
	case n.NonFinite:
		return "holds NaN or Infinity, which JSON cannot carry; write a finite number, null or a string"
	}
	return fmt.Sprintf("holds %s, too large for a double (it reads as Infinity, which JSON cannot carry); write a smaller number or a string", clip(string(args[n.Start:n.End])))
}

// clip shortens a long token for a reason.
func clip(tok string) string {
	const most = 40
	if len(tok) <= most {
		return tok
	}
	return tok[:most] + "…"
}

// kindOf names the JSON type of valid JSON text.
func kindOf(raw []byte) string {
	b := bytes.TrimLeft(raw, jsonSpace)
	if len(b) == 0 {
		return "nothing"
	}
	switch b[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "bool"
	case 'n':
		return "null"
	}
	return "number"
}

func article(kind string) string {
	switch kind {
	case "object", "array":
		return "an " + kind
	case "bool":
		return "a boolean"
	case "null", "nothing":
		return kind
	}
	return "a " + kind
}

// jsonReason turns a decoding error into a reason that names the offset
// (counted from base) and quotes the text around it.
func jsonReason(src string, base int, err error) string {
	var syn *json.SyntaxError
	if !errors.As(err, &syn) {
		return "invalid JSON: " + err.Error()
	}
	msg := syn.Error()
	// Offset counts the bytes read, including the offending one.
	at := int(syn.Offset) - 1
	if msg == "unexpected end of JSON input" {
		at = len(src)
		msg = "the JSON ends before the object is complete"
	}
	at = max(0, min(at, len(src)))
	rest := src[at:]
	switch {
	case strings.HasPrefix(rest, openTag):
		return fmt.Sprintf("missing </tool_call>: a new <tool_call> starts at offset %d before this call is closed", base+at)
	case strings.HasPrefix(rest, "NaN"), strings.HasPrefix(rest, "Infinity"), strings.HasPrefix(rest, "-Infinity"):
		msg = "NaN, Infinity and -Infinity are numbers only on their own"
	case strings.HasSuffix(msg, "after top-level value"):
		r, _ := utf8.DecodeRuneInString(rest)
		msg = fmt.Sprintf("unexpected %q after the end of the JSON object", r)
	}
	return fmt.Sprintf("invalid JSON at offset %d: %s (near %s)", base+at, msg, near(src, at))
}

// near quotes the text around byte offset at, cut on rune boundaries.
func near(src string, at int) string {
	lo, hi := max(0, at-nearRadius), min(len(src), at+nearRadius)
	for lo > 0 && !utf8.RuneStart(src[lo]) {
		lo--
	}
	for hi < len(src) && !utf8.RuneStart(src[hi]) {
		hi++
	}
	s := strconv.Quote(src[lo:hi])
	if lo > 0 {
		s = "…" + s
	}
	if hi < len(src) {
		s += "…"
	}
	return s
}
