package qwen3coder

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

	"github.com/agentenv/agentenv/plugins/toolformattest"
	"github.com/agentenv/agentenv/sdk/toolformat"
)

// The round trip: calls rendered the way the Qwen3-Coder chat template
// renders an assistant turn (shared/research/skyrl.md §6.3) read back as
// the same names and arguments, over random schemas and values.

// member is one key of a JSON object in insertion order.
type member struct {
	key string
	val any
}

// object is a JSON object that keeps its keys' order, as tojson does.
type object []member

// runePool is what random strings are made of. It leaves out the tags
// that end a value or a call wherever they appear (</parameter>,
// <parameter=, </function>, </tool_call>) and <think>/</think>, which end
// reasoning wherever they appear, in vLLM too.
var runePool = []string{"a", "Z", "0", " ", "\n", "\t", "\"", "\\", "/", "<", ">", "&", "'", "{", "}", "[", "]",
	":", ",", "\x01", "é", "日本", "😀", "\u2028", "<tool_call>", "<function=x>", "None", "True", "1", "-"}

func randString(r *rand.Rand) string { return toolformattest.RandString(r, runePool) }

var randName = toolformattest.RandName

var schemaTypes = []string{"string", "integer", "number", "boolean", "object", "array", "null"}

// randValue returns a value of the JSON Schema type typ.
func randValue(r *rand.Rand, typ string, depth int) any {
	switch typ {
	case "string":
		for {
			// "null" in any case reads back as null, in vLLM too.
			if s := randString(r); !strings.EqualFold(s, "null") {
				return s
			}
		}
	case "integer":
		return []any{int64(r.IntN(100)), -r.Int64(), r.Int64(), json.Number("123456789012345678901234567890")}[r.IntN(4)]
	case "number":
		return []float64{0.5, -2.25, 1e-7, 6.02e23, r.NormFloat64(), math.MaxFloat64, 5e-324, 3}[r.IntN(8)]
	case "boolean":
		return r.IntN(2) == 0
	case "null":
		return nil
	case "array":
		var a []any
		for range r.IntN(4) {
			a = append(a, randValue(r, schemaTypes[r.IntN(len(schemaTypes))], depth+1))
		}
		return a
	}
	var o object
	for range r.IntN(4) {
		typ := schemaTypes[r.IntN(4)]
		if depth < 2 {
			typ = schemaTypes[r.IntN(len(schemaTypes))]
		}
		o = append(o, member{randString(r), randValue(r, typ, depth+1)})
	}
	return o
}

// templateValue is what the template writes for a value: tojson for dicts and
// lists, Python's str() for anything else (True, None, float repr).
func templateValue(v any) string {
	switch v := v.(type) {
	case nil:
		return "None"
	case bool:
		if v {
			return "True"
		}
		return "False"
	case int64:
		return strconv.FormatInt(v, 10)
	case json.Number:
		return v.String()
	case float64:
		return pyFloatRepr(v)
	case string:
		return v
	}
	var b strings.Builder
	toJSON(&b, v)
	return b.String()
}

// toJSON writes v as tojson does (Python json.dumps, ensure_ascii=False,
// ", " and ": " separators, float repr).
func toJSON(b *strings.Builder, v any) {
	switch v := v.(type) {
	case string:
		b.WriteString(string(appendJSONString(nil, v)))
	case []any:
		b.WriteByte('[')
		for i, x := range v {
			if i > 0 {
				b.WriteString(", ")
			}
			toJSON(b, x)
		}
		b.WriteByte(']')
	case object:
		b.WriteByte('{')
		for i, m := range v {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(string(appendJSONString(nil, m.key)))
			b.WriteString(": ")
			toJSON(b, m.val)
		}
		b.WriteByte('}')
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(v))
	case int64, json.Number, float64:
		b.WriteString(templateValue(v))
	default:
		panic(fmt.Sprintf("toJSON: %T", v))
	}
}

// plain is v as encoding/json decodes it, for comparison.
func plain(v any) any {
	var b strings.Builder
	toJSON(&b, v)
	var out any
	if err := json.Unmarshal([]byte(b.String()), &out); err != nil {
		panic(fmt.Sprintf("%v: %s", err, b.String()))
	}
	return out
}

type renderedCall struct {
	name string
	args object
}

// render lays out an assistant turn as the Qwen3-Coder template does: the
// reply starts after "<|im_start|>assistant\n".
func render(think, content string, calls []renderedCall) string {
	var b strings.Builder
	if think != "" {
		b.WriteString("<think>\n" + think + "\n</think>\n\n")
	}
	if content != "" {
		b.WriteString(content + "\n\n")
	}
	for i, c := range calls {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString("<tool_call>\n<function=" + c.name + ">\n")
		for _, m := range c.args {
			b.WriteString("<parameter=" + m.key + ">\n" + templateValue(m.val) + "\n</parameter>\n")
		}
		b.WriteString("</function>\n</tool_call>")
	}
	b.WriteString("<|im_end|>")
	return b.String()
}

func TestRoundTrip(t *testing.T) {
	for seed := range uint64(500) {
		r := rand.New(rand.NewPCG(seed, 3))
		type tool struct {
			name   string
			params []member // name -> schema type
		}
		tools := make([]tool, 1+r.IntN(4))
		var offered []toolformat.Tool
		for i := range tools {
			tools[i].name = randName(r)
			props := map[string]any{}
			for range r.IntN(6) {
				name, typ := randName(r), schemaTypes[r.IntN(len(schemaTypes))]
				if _, dup := props[name]; dup {
					continue
				}
				props[name] = map[string]string{"type": typ}
				tools[i].params = append(tools[i].params, member{name, typ})
			}
			schema, _ := json.Marshal(map[string]any{"type": "object", "properties": props})
			offered = append(offered, toolformat.Tool{Name: tools[i].name, Parameters: schema})
		}
		var calls []renderedCall
		for range 1 + r.IntN(3) {
			tl := tools[r.IntN(len(tools))]
			c := renderedCall{name: tl.name}
			for _, p := range tl.params {
				typ := p.val.(string)
				// The template renders null as None, which vLLM reads back
				// as null through a Python literal: for object, array and
				// other types, not for string, integer, number or boolean.
				if (typ == "object" || typ == "array" || typ == "null") && r.IntN(8) == 0 {
					c.args = append(c.args, member{p.key, nil})
					continue
				}
				c.args = append(c.args, member{p.key, randValue(r, typ, 0)})
			}
			calls = append(calls, c)
		}
		var think, content string
		if r.IntN(2) == 0 {
			think = randString(r) // a call inside the reasoning is not read
		}
		if r.IntN(2) == 0 {
			content = strings.NewReplacer("<tool_call>", "", "<function=x>", "").Replace(randString(r))
		}
		reply := render(think, content, calls)

		got, err := New().Parse(context.Background(), reply, offered)
		if err != nil {
			t.Fatal(err)
		}
		wantContent := ""
		if content != "" {
			wantContent = content + "\n\n"
		}
		if think != "" {
			wantContent = "\n\n" + wantContent
		}
		if len(got.Unparsed) > 0 || len(got.Calls) != len(calls) || got.Content != wantContent {
			t.Fatalf("seed %d: reply %q\nparsed %+v\nwant content %q and %d calls", seed, reply, got, wantContent, len(calls))
		}
		for i, c := range calls {
			var args any
			if err := json.Unmarshal(got.Calls[i].Arguments, &args); err != nil {
				t.Fatalf("seed %d: call %d arguments %s: %v", seed, i, got.Calls[i].Arguments, err)
			}
			if got.Calls[i].Name != c.name || !reflect.DeepEqual(args, plain(c.args)) {
				t.Fatalf("seed %d: reply %q\ncall %d = %s %s, want %s %v", seed, reply, i, got.Calls[i].Name, got.Calls[i].Arguments, c.name, plain(c.args))
			}
		}
	}
}
