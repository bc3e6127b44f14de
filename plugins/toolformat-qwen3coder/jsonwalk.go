package qwen3coder

import (
	"bytes"
	"encoding/json"

	"github.com/agentenv/agentenv/sdk/toolformat/jsonscan"
)

// objectMembers calls fn with each member of the JSON object src, key
// decoded and value as raw JSON. src must be valid JSON (json.Valid); the
// walk only has to find where each value ends. It reports whether src is
// an object. Keys are compared as Python compares them: exactly.
func objectMembers(src []byte, fn func(key string, val []byte)) bool {
	return jsonscan.Members(src, func(key, val []byte) { fn(decodeKey(key), val) })
}

// decodeKey decodes a string literal; most have no escapes to decode.
func decodeKey(lit []byte) string {
	if bytes.IndexByte(lit, '\\') < 0 {
		return string(lit[1 : len(lit)-1])
	}
	var s string
	_ = json.Unmarshal(lit, &s)
	return s
}
