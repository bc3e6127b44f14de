package hermes

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agentenv/agentenv/plugins/toolformattest"
)

// The round trip: calls rendered the way the Qwen3 chat template renders
// an assistant turn (shared/research/skyrl.md §6.2) read back as the same
// names and arguments, over random schemas and values.

// member is one key of a JSON object in insertion order.
type member struct {
	key string
	val any
}

// object is a JSON object that keeps its keys' order, as tojson does.
type object []member

// runePool is what random strings are made of: markup, quotes, escapes,
// control characters, multi-byte text. It leaves out </tool_call>,
// <think> and </think>, which end a call or reasoning wherever they
// appear (in vLLM too).
var runePool = []string{"a", "Z", "0", " ", "\n", "\t", "\"", "\\", "/", "<", ">", "&", "'", "{", "}", "[", "]",
	":", ",", "\x01", "\x7f", "é", "日本", "😀", "\u2028", "<tool_call>", "<function=x>", "null", "NaN", "true"}

func randString(r *rand.Rand) string { return toolformattest.RandString(r, runePool) }

var randName = toolformattest.RandName

var schemaTypes = []string{"string", "integer", "number", "boolean", "object", "array", "null"}

// randValue returns a value of the JSON Schema type typ.
func randValue(r *rand.Rand, typ string, depth int) any {
	switch typ {
	case "string":
		return randString(r)
	case "integer":
		return []any{int64(r.IntN(100)), -r.Int64(), r.Int64(), json.Number("123456789012345678901234567890")}[r.IntN(4)]
	case "number":
		return []float64{0.5, -2.25, 1e-7, 6.02e23, r.NormFloat64(), math.MaxFloat64, 5e-324}[r.IntN(7)]
	case "boolean":
		return r.IntN(2) == 0
	case "null":
		return nil
	case "array":
		var a []any
		for range r.IntN(4) {
			a = append(a, randValue(r, leafOrNested(r, depth), depth+1))
		}
		return a
	}
	var o object
	for range r.IntN(4) {
		o = append(o, member{randString(r), randValue(r, leafOrNested(r, depth), depth+1)})
	}
	return o
}

func leafOrNested(r *rand.Rand, depth int) string {
	if depth >= 3 {
		return schemaTypes[r.IntN(4)]
	}
	return schemaTypes[r.IntN(len(schemaTypes))]
}

// toJSON writes v as tojson does (Python json.dumps, ensure_ascii=False,
// ", " and ": " separators) or, compact, as many clients send arguments.
func toJSON(b *strings.Builder, v any, compact bool) {
	comma, colon := ", ", ": "
	if compact {
		comma, colon = ",", ":"
	}
	switch v := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(v))
	case int64:
		b.WriteString(strconv.FormatInt(v, 10))
	case json.Number:
		b.WriteString(v.String())
	case float64:
		s := strconv.FormatFloat(v, 'g', -1, 64)
		if !strings.ContainsAny(s, ".e") {
			s += ".0" // Python writes floats with a fraction
		}
		b.WriteString(s)
	case string:
		writeString(b, v)
	case []any:
		b.WriteByte('[')
		for i, x := range v {
			if i > 0 {
				b.WriteString(comma)
			}
			toJSON(b, x, compact)
		}
		b.WriteByte(']')
	case object:
		b.WriteByte('{')
		for i, m := range v {
			if i > 0 {
				b.WriteString(comma)
			}
			writeString(b, m.key)
			b.WriteString(colon)
			toJSON(b, m.val, compact)
		}
		b.WriteByte('}')
	default:
		panic(fmt.Sprintf("toJSON: %T", v))
	}
}

// writeString escapes as Python's json.dumps with ensure_ascii=False.
func writeString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for _, c := range s {
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteRune(c)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\t':
			b.WriteString(`\t`)
		case c < 0x20:
			fmt.Fprintf(b, `\u%04x`, c)
		default:
			b.WriteRune(c)
		}
	}
	b.WriteByte('"')
}

// plain is v as encoding/json decodes it, for comparison.
func plain(v any) any {
	var b strings.Builder
	toJSON(&b, v, true)
	var out any
	if err := json.Unmarshal([]byte(b.String()), &out); err != nil {
		panic(err)
	}
	return out
}

type renderedCall struct {
	name string
	args object
}

// render lays out an assistant turn as the Qwen3 template does.
func render(r *rand.Rand, think, content string, calls []renderedCall) string {
	var b strings.Builder
	if think != "" {
		b.WriteString("<think>\n" + think + "\n</think>\n\n")
	}
	b.WriteString(content)
	for i, c := range calls {
		if content != "" || i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString("<tool_call>\n{\"name\": \"" + c.name + "\", \"arguments\": ")
		toJSON(&b, c.args, r.IntN(3) == 0)
		b.WriteString("}\n</tool_call>")
	}
	b.WriteString("<|im_end|>")
	return b.String()
}

func TestRoundTrip(t *testing.T) {
	for seed := range uint64(500) {
		r := rand.New(rand.NewPCG(seed, 2))
		// A random toolset; each call uses one tool with values of its types.
		type tool struct {
			name   string
			params []member // name -> type
		}
		tools := make([]tool, 1+r.IntN(4))
		for i := range tools {
			tools[i].name = randName(r)
			for range r.IntN(6) {
				tools[i].params = append(tools[i].params, member{randName(r), schemaTypes[r.IntN(len(schemaTypes))]})
			}
		}
		var calls []renderedCall
		for range 1 + r.IntN(3) {
			tl := tools[r.IntN(len(tools))]
			c := renderedCall{name: tl.name}
			for _, p := range tl.params {
				c.args = append(c.args, member{p.key, randValue(r, p.val.(string), 0)})
			}
			calls = append(calls, c)
		}
		var think, content string
		if r.IntN(2) == 0 {
			think = randString(r) // a call inside the reasoning is not read
		}
		if r.IntN(2) == 0 {
			content = strings.ReplaceAll(randString(r), "<tool_call>", "")
		}
		reply := render(r, think, content, calls)

		got, err := New().Parse(context.Background(), reply, nil)
		if err != nil {
			t.Fatal(err)
		}
		wantContent := content
		if content != "" {
			wantContent += "\n"
		}
		if think != "" {
			wantContent = "\n\n" + wantContent
		}
		if len(got.Unparsed) > 0 || len(got.Calls) != len(calls) || got.Content != wantContent {
			t.Fatalf("seed %d: reply %q\nparsed %+v\nwant content %q and %d calls", seed, reply, got, wantContent, len(calls))
		}
		for i, c := range calls {
			var args any
			if err := json.Unmarshal(got.Calls[i].Arguments, &args); err != nil || !utf8.Valid(got.Calls[i].Arguments) {
				t.Fatalf("seed %d: call %d arguments %s: %v", seed, i, got.Calls[i].Arguments, err)
			}
			if got.Calls[i].Name != c.name || !reflect.DeepEqual(args, plain(c.args)) {
				t.Fatalf("seed %d: reply %q\ncall %d = %s %s, want %s %v", seed, reply, i, got.Calls[i].Name, got.Calls[i].Arguments, c.name, plain(c.args))
			}
		}
	}
}
