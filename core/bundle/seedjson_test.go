package bundle

import (
	"bytes"
	"encoding/json"
	"io"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

var seedJSONCases = []string{
	`{}`,
	` {"id": "a"} `,
	`{"id":"a","n":-12.5e+3,"z":0,"big":12345678901234567890,"t":true,"f":false,"nil":null}`,
	`{"s":"esc \" \\ \/ \b \f \n \r \t \u00e9 \ud83d\ude00 end"}`,
	`{"lone":"\ud83d x", "lone2":"\ude00", "pair_bad":"\ud83d\u0041"}`,
	`{"nested":{"a":[1,[2,{"b":[]}],{}],"c":{"d":null}}}`,
	`{"utf8":"héllo wörld ✓"}`,
	// invalid
	``, `[]`, `"x"`, `{`, `{"a"}`, `{"a":}`, `{"a":1,}`, `{"a":1 "b":2}`, `{a:1}`, `{"a":01}`,
	`{"a":1.}`, `{"a":.5}`, `{"a":-}`, `{"a":1e}`, `{"a":+1}`, `{"a":tru}`, `{"a":nul}`, `{"a":"x}`,
	`{"a":"\x"}`, `{"a":"\u12"}`, "{\"a\":\"tab\there\"}", `{"a":[1,]}`, `{"a":[1 2]}`, `{} {}`,
	`{"a":1}x`, `{"a":"b"`, `{"a":[`, `{"a":{"b":1}`, `{"a":NaN}`, `{"a":Infinity}`,
}

// The seed parser agrees with encoding/json (numbers as json.Number) on
// what is valid and on the values.
func TestSeedJSONMatchesEncodingJSON(t *testing.T) {
	for _, in := range seedJSONCases {
		checkSeedJSON(t, []byte(in))
	}
}

func FuzzSeedJSON(f *testing.F) {
	for _, in := range seedJSONCases {
		f.Add([]byte(in))
	}
	f.Fuzz(func(t *testing.T, in []byte) { checkSeedJSON(t, in) })
}

func checkSeedJSON(t *testing.T, in []byte) {
	t.Helper()
	got, err := decodeSeedObject(in)
	var want map[string]any
	dec := json.NewDecoder(bytes.NewReader(in))
	dec.UseNumber()
	werr := dec.Decode(&want)
	if werr == nil {
		if _, terr := dec.Token(); terr != io.EOF {
			werr = errTrailing
		}
	}
	trimmed := bytes.TrimSpace(in)
	if werr == nil && (len(trimmed) == 0 || trimmed[0] != '{') {
		werr = errTrailing // "null" decodes into a nil map; a seed must be an object
	}
	if !utf8.Valid(in) || hasDuplicateKeys(in) {
		// We refuse these; encoding/json replaces bad bytes and keeps the
		// last duplicate.
		if err == nil {
			t.Errorf("%q: accepted, want refused", in)
		}
		return
	}
	switch {
	case (err == nil) != (werr == nil):
		t.Errorf("%q: our error %v, encoding/json's %v", in, err, werr)
	case err == nil && !reflect.DeepEqual(got, want):
		t.Errorf("%q: got %#v, want %#v", in, got, want)
	case err != nil && !strings.Contains(err.Error(), "column"):
		t.Errorf("%q: error %q names no column", in, err)
	}
}

var errTrailing = &json.SyntaxError{}

// hasDuplicateKeys reports whether any object in a valid document repeats
// a key (false for invalid documents).
func hasDuplicateKeys(in []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(in))
	var stack []map[string]bool
	expectKey := []bool{}
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		switch tok := tok.(type) {
		case json.Delim:
			switch tok {
			case '{':
				stack = append(stack, map[string]bool{})
				expectKey = append(expectKey, true)
				continue
			case '[':
				stack = append(stack, nil)
				expectKey = append(expectKey, false)
				continue
			default:
				stack, expectKey = stack[:len(stack)-1], expectKey[:len(expectKey)-1]
			}
		case string:
			if n := len(stack); n > 0 && stack[n-1] != nil && expectKey[n-1] {
				if stack[n-1][tok] {
					return true
				}
				stack[n-1][tok] = true
				expectKey[n-1] = false
				continue
			}
		}
		if n := len(stack); n > 0 && stack[n-1] != nil {
			expectKey[n-1] = true
		}
	}
}
