package hermes

import (
	"bytes"
	"encoding/json"

	"github.com/agentenv/agentenv/sdk/toolformat/jsonscan"
)

// callFields are the top-level fields of a call object that matter. A
// repeated key keeps its last value, as in Python's json.loads.
type callFields struct {
	name, arguments []byte // nil when absent
	hasParameters   bool   // the common mistake of writing "parameters"
}

// objectFields splits valid JSON into its top-level fields. It returns the
// JSON kind of src and, for an object, the fields. src must be valid JSON
// (json.Valid), so the scan only has to find where each value ends.
func objectFields(src []byte) (callFields, string) {
	var f callFields
	if kind := kindOf(src[jsonscan.SkipSpace(src, 0):]); kind != "object" {
		return f, kind
	}
	jsonscan.Members(src, func(key, val []byte) {
		switch {
		case keyIs(key, "name"):
			f.name = val
		case keyIs(key, "arguments"):
			f.arguments = val
		case keyIs(key, "parameters"):
			f.hasParameters = true
		}
	})
	return f, "object"
}

// keyIs reports whether the string literal key decodes to want; keys
// without escapes (nearly all) are compared without decoding.
func keyIs(key []byte, want string) bool {
	if bytes.IndexByte(key, '\\') < 0 {
		return string(key[1:len(key)-1]) == want
	}
	var s string
	_ = json.Unmarshal(key, &s)
	return s == want
}
