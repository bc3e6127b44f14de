package qwen3coder

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/agentenv/agentenv/sdk/toolformat"
	"github.com/agentenv/agentenv/sdk/toolformat/jsonscan"
)

// schemaIndex is what a tool's schema says about each parameter: the
// branch of vLLM's conversion its type takes. A nil index (a tool not in
// the request) leaves every value a string.
type schemaIndex map[string]typeClass

// indexTools returns the index for the first tool named name, as vLLM's
// find_tool_properties (vllm/tool_parsers/utils.py) finds it:
// parameters.properties, or nothing (every value a string) when the tool
// has no properties.
func indexTools(tools []toolformat.Tool, name string) schemaIndex {
	for _, t := range tools {
		if t.Name == name {
			return indexSchema(t.Parameters)
		}
	}
	return nil
}

// indexSchema reads a tool's parameters schema: the class of each entry of
// parameters.properties. Properties that are missing or not an object
// leave every value a string.
func indexSchema(parameters json.RawMessage) schemaIndex {
	if !json.Valid(parameters) {
		return nil
	}
	var props []byte
	objectMembers(parameters, func(k string, v []byte) {
		if k == "properties" {
			props = v
		}
	})
	idx := schemaIndex{}
	if props == nil || !objectMembers(props, func(name string, schema []byte) { idx[name] = schemaClass(schema) }) {
		return nil
	}
	return idx
}

// schemaClass is the branch vLLM's conversion takes for a parameter's
// schema: str(schema["type"]).strip().lower() when it has a type; an
// anyOf with no type is read as an object (JSON, then a Python literal);
// anything else is a string.
func schemaClass(schema []byte) typeClass {
	var typ []byte
	anyOf := false
	objectMembers(schema, func(k string, v []byte) {
		switch k {
		case "type":
			typ = v
		case "anyOf":
			anyOf = true
		}
	})
	if typ == nil && anyOf {
		return classAnyOf
	}
	return classify(typeName(typ))
}

// typeName reads a schema's "type" value: absent is "string"; a string is
// stripped and lowered; anything else (a list such as ["integer", "null"])
// is "other": Python's str() of it starts with a bracket and matches no
// named type.
func typeName(raw []byte) string {
	if raw == nil {
		return "string"
	}
	var s string
	if n := len(raw); n >= 2 && raw[0] == '"' && raw[n-1] == '"' && !bytes.ContainsAny(raw, "\\\x00") {
		s = string(raw[1 : n-1]) // no escapes to decode
	} else if json.Unmarshal(raw, &s) != nil {
		return "other"
	}
	return strings.ToLower(pyStrip(s))
}

// typeClass is the branch of vLLM's conversion a schema type takes.
type typeClass int

const (
	classString typeClass = iota
	classInteger
	classNumber
	classBoolean
	classContainer
	classAnyOf
	classOther
)

func classify(t string) typeClass {
	switch t {
	case "string", "str", "text", "varchar", "char", "enum":
		return classString
	case "boolean", "bool", "binary":
		return classBoolean
	case "object", "array", "arr":
		return classContainer
	}
	for _, p := range []string{"int", "uint", "long", "short", "unsigned"} {
		if strings.HasPrefix(t, p) {
			return classInteger
		}
	}
	if strings.HasPrefix(t, "num") || strings.HasPrefix(t, "float") {
		return classNumber
	}
	if strings.HasPrefix(t, "dict") || strings.HasPrefix(t, "list") {
		return classContainer
	}
	return classOther
}

// convert types one parameter value as vLLM does. Where vLLM reads a
// value, the same value comes back. Where vLLM cannot read it as its type
// (it passes the raw text on, turns a non-boolean into false, writes
// arguments that are not JSON, or fails the whole reply), reason says why
// and the call is returned unparsed. err is the step's end (ctx), which
// stops a long literal's reading.
func convert(ctx context.Context, name, value string, idx schemaIndex) (out json.RawMessage, reason string, err error) {
	if strings.EqualFold(value, "null") {
		return json.RawMessage("null"), "", nil
	}
	class, ok := idx[name]
	if !ok || class == classString {
		return jsonString(value), "", nil
	}
	switch class {
	case classContainer:
		return convertContainer(ctx, name, value)
	case classInteger, classNumber, classBoolean:
		out, reason = convertScalar(name, value, class)
		return out, reason, nil
	case classAnyOf:
		// JSON first, as for an object; what is neither JSON nor a
		// literal stays the text.
		if v, reason, isJSON := pyJSON(name, value); isJSON {
			return v, reason, nil
		}
	}
	// A Python literal if it is one, else the raw text.
	out, err = literalJSON(ctx, value)
	var notJSON *notJSONError
	switch {
	case errors.As(err, &notJSON):
		return nil, fmt.Sprintf("parameter '%s' holds %v", name, err), nil
	case errors.Is(err, errLiteral):
		return jsonString(value), "", nil
	case err != nil:
		return nil, "", err
	}
	return out, "", nil
}

// convertScalar types an integer, number or boolean value.
func convertScalar(name, value string, class typeClass) (json.RawMessage, string) {
	// The Qwen3-Coder template renders a null argument as None; vLLM reads
	// it back as null only through a Python literal (object, array, anyOf
	// and other types).
	none := ""
	if strings.EqualFold(value, "none") {
		none = "; write null for no value"
	}
	switch class {
	case classInteger:
		n, ok := pyInt(value)
		if !ok {
			if digits, long := longInteger(value); long {
				return nil, fmt.Sprintf("parameter '%s' has %d digits, more than the %d that Python's int() reads", name, digits, jsonscan.MaxIntDigits)
			}
			return nil, fmt.Sprintf("parameter '%s' is not an integer: %s%s", name, quoteValue(value), none)
		}
		return json.RawMessage(n), ""
	case classNumber:
		f, ok := pyFloat(value)
		if !ok {
			return nil, fmt.Sprintf("parameter '%s' is not a number: %s%s", name, quoteValue(value), none)
		}
		text, ok := floatArgument(f)
		if !ok {
			return nil, fmt.Sprintf("parameter '%s' is not a finite number: %s", name, quoteValue(value))
		}
		return json.RawMessage(text), ""
	case classBoolean:
		switch strings.ToLower(value) {
		case "true":
			return json.RawMessage("true"), ""
		case "false":
			return json.RawMessage("false"), ""
		}
		return nil, fmt.Sprintf("parameter '%s' is not a boolean (write true or false): %s%s", name, quoteValue(value), none)
	}
	panic("convertScalar: not a scalar class")
}

// longInteger reports whether value is an integer that int() refuses only
// for its length, and its digits.
func longInteger(value string) (int, bool) {
	t, ok := pyNumberText(value)
	if !ok {
		return 0, false
	}
	digits := strings.TrimLeft(t, "+-")
	if len(t)-len(digits) > 1 || digits == "" || strings.IndexFunc(digits, func(r rune) bool { return r < '0' || r > '9' }) >= 0 {
		return 0, false
	}
	return len(digits), len(digits) > jsonscan.MaxIntDigits
}

// pyJSON reads value as Python's json.loads does. isJSON is false when
// json.loads fails (vLLM then tries a Python literal); otherwise the value
// is returned compact, or reason says why it cannot go on as JSON.
func pyJSON(name, value string) (out json.RawMessage, reason string, isJSON bool) {
	raw := []byte(value)
	if !json.Valid(jsonscan.MaskNonFinite(raw)) {
		return nil, "", false
	}
	if _, long := jsonscan.FirstOdd(raw, jsonscan.LongInteger); long {
		return nil, "", false // json.loads refuses it
	}
	if _, bad := jsonscan.FirstOdd(raw, jsonscan.NonFiniteValue); bad {
		return nil, fmt.Sprintf("parameter '%s' holds NaN or Infinity (or a number too large for a double), which JSON cannot carry; write a finite number, null or a string", name), true
	}
	var b bytes.Buffer
	_ = json.Compact(&b, raw) // valid: checked above
	return b.Bytes(), "", true
}

// convertContainer reads an object or array value: JSON first, then a
// Python literal ({'a': True}), as vLLM does.
func convertContainer(ctx context.Context, name, value string) (json.RawMessage, string, error) {
	if v, reason, isJSON := pyJSON(name, value); isJSON {
		return v, reason, nil
	}
	out, err := literalJSON(ctx, value)
	var notJSON *notJSONError
	switch {
	case errors.As(err, &notJSON):
		return nil, fmt.Sprintf("parameter '%s' holds %v", name, err), nil
	case errors.Is(err, errLiteral):
		if digits, long := longJSONInteger(value); long {
			return nil, fmt.Sprintf("parameter '%s' holds an integer of %d digits, more than the %d that Python reads", name, digits, jsonscan.MaxIntDigits), nil
		}
		return nil, fmt.Sprintf("parameter '%s' is not valid JSON: %s", name, jsonProblem(value, json.Unmarshal([]byte(value), new(json.RawMessage)))), nil
	case err != nil:
		return nil, "", err
	}
	return out, "", nil
}

// longJSONInteger reports an integer past the digit limit in JSON text.
func longJSONInteger(value string) (int, bool) {
	n, ok := jsonscan.FirstOdd([]byte(value), jsonscan.LongInteger)
	if !ok {
		return 0, false
	}
	return len(strings.TrimPrefix(value[n.Start:n.End], "-")), true
}

// jsonProblem describes a JSON decoding error with its offset in the value.
func jsonProblem(src string, err error) string {
	var syn *json.SyntaxError
	if !errors.As(err, &syn) {
		return err.Error()
	}
	if syn.Error() == "unexpected end of JSON input" {
		return fmt.Sprintf("it ends at offset %d before the value is complete", len(src))
	}
	at := max(0, int(syn.Offset)-1)
	return fmt.Sprintf("%s at offset %d (near %s)", syn.Error(), at, excerpt(src, at))
}

// maxQuoted bounds how much of a bad value a reason repeats.
const maxQuoted = 80

func quoteValue(v string) string {
	if len(v) <= maxQuoted {
		return "'" + v + "'"
	}
	cut := maxQuoted
	for cut > 0 && !isRuneStart(v[cut]) {
		cut--
	}
	return "'" + v[:cut] + "…'"
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

// excerpt quotes the text around byte offset at.
func excerpt(src string, at int) string {
	const radius = 24
	lo, hi := max(0, at-radius), min(len(src), at+radius)
	for lo > 0 && !isRuneStart(src[lo]) {
		lo--
	}
	for hi < len(src) && !isRuneStart(src[hi]) {
		hi++
	}
	return strconv.Quote(src[lo:hi])
}

// jsonString encodes a raw value; most need no escapes, so the buffer is
// sized for the value plus a little.
func jsonString(v string) json.RawMessage {
	return appendJSONString(make([]byte, 0, len(v)+len(v)/16+2), v)
}
