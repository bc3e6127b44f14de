// Package toolformattest is the test harness both tool-format plugins share:
// the golden vectors, the check of a parse against them, the plugin-binary
// and fuzz checks and the paired benchmark timer. What differs per format
// (parser, binary, fuzz seeds, renderers) is passed in.
package toolformattest

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"reflect"
	"testing"

	"github.com/agentenv/agentenv/sdk/sdktest"
	"github.com/agentenv/agentenv/sdk/toolformat"
)

// GoldenPath is the table both tool-format plugins are tested against,
// relative to a plugin module's folder (where its tests run).
const GoldenPath = "../testdata/toolformat/golden.json"

// Case is one golden vector.
type Case struct {
	Name    string
	Formats []string
	Tools   string
	Reply   string
	Content string
	Calls   []struct {
		Name      string
		Arguments json.RawMessage
	}
	Unparsed []toolformat.Unparsed
	VLLM     *json.RawMessage `json:"vllm"`
	Why      string
}

type goldenFile struct {
	Toolsets map[string][]struct {
		Name, Description string
		Parameters        json.RawMessage
	}
	Cases []Case
}

// Cases returns the golden cases for format with their toolsets.
func Cases(t testing.TB, format string) ([]Case, map[string][]toolformat.Tool) {
	t.Helper()
	b, err := os.ReadFile(GoldenPath)
	if err != nil {
		t.Fatal(err)
	}
	var f goldenFile
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatalf("%s: %v", GoldenPath, err)
	}
	sets := map[string][]toolformat.Tool{}
	for name, tools := range f.Toolsets {
		for _, tl := range tools {
			sets[name] = append(sets[name], toolformat.Tool{Name: tl.Name, Description: tl.Description, Parameters: tl.Parameters})
		}
	}
	var out []Case
	for _, c := range f.Cases {
		for _, ff := range c.Formats {
			if ff == format {
				out = append(out, c)
			}
		}
	}
	if len(out) < 10 {
		t.Fatalf("%s has only %d cases for %s", GoldenPath, len(out), format)
	}
	return out, sets
}

// SameJSON compares two JSON texts as values, numbers by their text.
func SameJSON(a, b []byte) bool {
	decode := func(x []byte) (any, error) {
		d := json.NewDecoder(bytes.NewReader(x))
		d.UseNumber()
		var v any
		return v, d.Decode(&v)
	}
	va, errA := decode(a)
	vb, errB := decode(b)
	return errA == nil && errB == nil && reflect.DeepEqual(va, vb)
}

// Golden runs every golden case for format through a parser from newParser,
// one subtest per case.
func Golden(t *testing.T, format string, newParser func() toolformat.Parser) {
	cases, sets := Cases(t, format)
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			if (c.VLLM != nil) != (c.Why != "") {
				t.Fatalf("a case differing from vLLM needs both a vllm entry and a why")
			}
			if c.VLLM == nil && len(c.Unparsed) > 0 {
				t.Fatalf("unparsed calls differ from vLLM, so the case needs a vllm entry")
			}
			tools, ok := sets[c.Tools]
			if !ok && c.Tools != "none" {
				t.Fatalf("unknown toolset %q", c.Tools)
			}
			got, err := newParser().Parse(context.Background(), c.Reply, tools)
			if err != nil {
				t.Fatal(err)
			}
			Check(t, got, c)
		})
	}
}

// Check compares a parse with a golden case's expectation.
func Check(t *testing.T, got toolformat.Parsed, c Case) {
	t.Helper()
	if got.Content != c.Content {
		t.Errorf("content = %q, want %q", got.Content, c.Content)
	}
	if len(got.Calls) != len(c.Calls) {
		t.Fatalf("calls = %+v, want %d calls", got.Calls, len(c.Calls))
	}
	for i, w := range c.Calls {
		if got.Calls[i].Name != w.Name || !SameJSON(got.Calls[i].Arguments, w.Arguments) {
			t.Errorf("call %d = %s %s, want %s %s", i, got.Calls[i].Name, got.Calls[i].Arguments, w.Name, w.Arguments)
		}
	}
	if len(got.Unparsed) != len(c.Unparsed) {
		t.Fatalf("unparsed = %+v, want %+v", got.Unparsed, c.Unparsed)
	}
	for i, w := range c.Unparsed {
		if got.Unparsed[i] != w {
			t.Errorf("unparsed %d = %+v\nwant %+v", i, got.Unparsed[i], w)
		}
	}
}

// fitsGo reports whether every call's arguments decode into Go values.
func fitsGo(c Case) bool {
	for _, w := range c.Calls {
		var v any
		if json.Unmarshal(w.Arguments, &v) != nil {
			return false
		}
	}
	return true
}

// Samples are the golden cases every call of which is read, as
// conformance samples. The conformance check decodes arguments into Go
// values, so a case with a number past float64 (read exactly here) is
// left out.
func Samples(t testing.TB, format string) []sdktest.ToolFormatSample {
	cases, sets := Cases(t, format)
	var out []sdktest.ToolFormatSample
	for _, c := range cases {
		if len(c.Unparsed) > 0 {
			continue
		}
		s := sdktest.ToolFormatSample{Text: c.Reply, Tools: sets[c.Tools]}
		if !fitsGo(c) {
			continue
		}
		for _, w := range c.Calls {
			s.Want = append(s.Want, toolformat.Call{Name: w.Name, Arguments: w.Arguments})
		}
		out = append(out, s)
	}
	return out
}
