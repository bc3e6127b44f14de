package hermes

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/agentenv/agentenv/sdk/toolformat"
)

const (
	openTag  = "<tool_call>"
	closeTag = "</tool_call>"
	// jsonSpace is what Python's json.loads skips around a value.
	jsonSpace = " \t\n\r"
	// nearRadius is how much text a reason quotes on each side of an error.
	nearRadius = 24
)

// parse reads a reply that TrimReply has already cleaned. Blocks are found
// as vLLM's regex `<tool_call>(.*?)</tool_call>|<tool_call>(.*)` finds
// them: each runs to the first </tool_call> after it, and a last block
// with no </tool_call> runs to the end of the reply.
func parse(text string) toolformat.Parsed {
	first := strings.Index(text, openTag)
	if first < 0 {
		return toolformat.Parsed{Content: text}
	}
	// Like vLLM, content is the text before the first call; text between
	// and after calls is dropped.
	out := toolformat.Parsed{Content: text[:first]}
	for pos := first; ; {
		i := strings.Index(text[pos:], openTag)
		if i < 0 {
			break
		}
		start := pos + i
		bodyStart := start + len(openTag)
		body, end, closed := text[bodyStart:], len(text), false
		if j := strings.Index(body, closeTag); j >= 0 {
			body, end, closed = body[:j], bodyStart+j+len(closeTag), true
		}
		call, reason := readCall(body, closed)
		if reason == "" {
			out.Calls = append(out.Calls, call)
		} else {
			out.Unparsed = append(out.Unparsed, toolformat.Unparsed{Text: text[start:end], Reason: reason})
		}
		pos = end
	}
	return out
}

// readCall reads one block's body. It returns the call, or the reason the
// block is not one; offsets in reasons count bytes from the <tool_call>.
func readCall(body string, closed bool) (toolformat.Call, string) {
	unclosed := ""
	if !closed {
		unclosed = " (the call has no </tool_call>; was the reply cut off?)"
	}
	if strings.Trim(body, jsonSpace) == "" {
		return toolformat.Call{}, `empty <tool_call>: write {"name": "TOOL", "arguments": {...}} inside it` + unclosed
	}
	raw := []byte(body)
	if !json.Valid(raw) {
		var v any
		return toolformat.Call{}, jsonReason(body, len(openTag), json.Unmarshal(raw, &v)) + unclosed
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

	rawArgs := fields.arguments
	if rawArgs == nil {
		hint := `; write "arguments": {} for a tool that takes none`
		if fields.hasParameters {
			hint = `; the key is "arguments", not "parameters"`
		}
		return toolformat.Call{}, fmt.Sprintf(`call to %q has no "arguments"%s`, name, hint)
	}
	args := rawArgs
	// Models sometimes write the arguments as a JSON string holding the
	// object; vLLM decodes it, and so do we.
	if kindOf(rawArgs) == "string" {
		var s string
		_ = json.Unmarshal(rawArgs, &s) // valid: the whole call was
		if !json.Valid([]byte(s)) {
			var v any
			return toolformat.Call{}, fmt.Sprintf(`call to %q: "arguments" is a string but not a JSON object inside: %s`,
				name, jsonReason(s, 0, json.Unmarshal([]byte(s), &v)))
		}
		args = bytes.Trim([]byte(s), jsonSpace)
	}
	if k := kindOf(args); k != "object" {
		return toolformat.Call{}, fmt.Sprintf(`call to %q: "arguments" must be a JSON object, got %s`, name, article(k))
	}
	// The arguments go on as the model wrote them (whitespace and all):
	// valid JSON, and closer to vLLM's json.dumps than a re-encoding.
	return toolformat.Call{Name: name, Arguments: args}, ""
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
	case strings.HasPrefix(rest, "NaN"), strings.HasPrefix(rest, "Infinity"):
		msg = "NaN and Infinity are not JSON numbers; write a finite number, null or a string"
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
