package qwen3coder

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/agentenv/agentenv/sdk/toolformat"
)

// schemaIndex is what a tool's schema says about each parameter: the
// branch of vLLM's conversion its type takes. A nil index (a tool not in
// the request) leaves every value a string.
type schemaIndex map[string]typeClass

// indexTools returns the index for the first tool named name, as vLLM's
// _get_arguments_config finds it: parameters.properties, or, with no
// properties key, the parameters object itself.
func indexTools(tools []toolformat.Tool, name string) schemaIndex {
	for _, t := range tools {
		if t.Name == name {
			return indexSchema(t.Parameters)
		}
	}
	return nil
}

// indexSchema reads a tool's parameters schema: parameters.properties,
// or, with no properties key, the parameters object itself (vLLM reads it
// that way). Anything but an object leaves every value a string.
func indexSchema(parameters json.RawMessage) schemaIndex {
	if !json.Valid(parameters) {
		return nil
	}
	config, hasProps := []byte(parameters), false
	if !objectMembers(parameters, func(k string, v []byte) {
		if k == "properties" {
			config, hasProps = v, true
		}
	}) {
		return nil
	}
	idx := schemaIndex{}
	if !objectMembers(config, func(name string, schema []byte) { idx[name] = classify(schemaType(schema)) }) && hasProps {
		return nil
	}
	return idx
}

// schemaType is vLLM's str(schema["type"]).strip().lower(), or "string"
// when the schema is not an object or has no type.
func schemaType(schema []byte) string {
	var typ []byte
	objectMembers(schema, func(k string, v []byte) {
		if k == "type" {
			typ = v
		}
	})
	return typeName(typ)
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
// (it passes the raw text on, turns a non-boolean into false, or fails the
// whole reply), reason says why and the call is returned unparsed.
func convert(name, value string, idx schemaIndex) (json.RawMessage, string) {
	if strings.EqualFold(value, "null") {
		return json.RawMessage("null"), ""
	}
	class, ok := idx[name]
	if !ok || class == classString {
		return jsonString(value), ""
	}
	// The Qwen3-Coder template renders None as "None"; newer vLLM reads it
	// back as null for every non-string type, and so do we.
	if class != classOther && strings.EqualFold(value, "none") {
		return json.RawMessage("null"), ""
	}
	switch class {
	case classInteger:
		n, ok := pyInt(value)
		if !ok {
			return nil, fmt.Sprintf("parameter '%s' is not an integer: %s", name, quoteValue(value))
		}
		return json.RawMessage(n), ""
	case classNumber:
		f, ok := pyFloat(value)
		if !ok {
			return nil, fmt.Sprintf("parameter '%s' is not a number: %s", name, quoteValue(value))
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
		return nil, fmt.Sprintf("parameter '%s' is not a boolean (write true or false): %s", name, quoteValue(value))
	case classContainer:
		return convertContainer(name, value)
	}
	// Any other type: a Python literal if it is one, else the raw text.
	if v, err := literalEval(value); err == nil {
		if out, err := appendPyJSON(nil, v); err == nil {
			return out, ""
		}
	}
	return jsonString(value), ""
}

// convertContainer reads an object or array value: JSON first, then a
// Python literal ({'a': True}), as vLLM does.
func convertContainer(name, value string) (json.RawMessage, string) {
	var check json.RawMessage
	jsonErr := json.Unmarshal([]byte(value), &check)
	if jsonErr == nil {
		var out bytes.Buffer
		if err := json.Compact(&out, []byte(value)); err == nil {
			return out.Bytes(), ""
		}
	}
	if nonFiniteAt(value, jsonErr) {
		return nil, fmt.Sprintf("parameter '%s' holds NaN or Infinity, which JSON cannot carry; write a finite number, null or a string", name)
	}
	v, err := literalEval(value)
	if err != nil {
		return nil, fmt.Sprintf("parameter '%s' is not valid JSON: %s", name, jsonProblem(value, jsonErr))
	}
	out, err := appendPyJSON(nil, v)
	if err != nil {
		return nil, fmt.Sprintf("parameter '%s' holds %v", name, err)
	}
	return out, ""
}

// nonFiniteAt reports whether JSON decoding stopped at NaN, Infinity or
// -Infinity, which Python's json.loads accepts and Go's does not.
func nonFiniteAt(src string, err error) bool {
	var syn *json.SyntaxError
	if !errors.As(err, &syn) {
		return false
	}
	at := int(syn.Offset) - 1
	if at < 0 || at >= len(src) {
		return false
	}
	rest := src[at:]
	return strings.HasPrefix(rest, "NaN") || strings.HasPrefix(rest, "Infinity")
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
