package qwen3coder

import (
	"context"
	"encoding/json"
	"os"
	"testing"

	"github.com/agentenv/agentenv/sdk/sdktest"
	"github.com/agentenv/agentenv/sdk/toolformat"
)

// goldenPath is the table both tool-format plugins are tested against.
const goldenPath = "../testdata/toolformat/golden.json"

type goldenCase struct {
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
	Cases []goldenCase
}

// goldenCases returns the cases for format with their toolsets.
func goldenCases(t testing.TB, format string) ([]goldenCase, map[string][]toolformat.Tool) {
	t.Helper()
	b, err := os.ReadFile(goldenPath)
	if err != nil {
		t.Fatal(err)
	}
	var f goldenFile
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatalf("%s: %v", goldenPath, err)
	}
	sets := map[string][]toolformat.Tool{}
	for name, tools := range f.Toolsets {
		for _, tl := range tools {
			sets[name] = append(sets[name], toolformat.Tool{Name: tl.Name, Description: tl.Description, Parameters: tl.Parameters})
		}
	}
	var out []goldenCase
	for _, c := range f.Cases {
		for _, ff := range c.Formats {
			if ff == format {
				out = append(out, c)
			}
		}
	}
	if len(out) < 10 {
		t.Fatalf("%s has only %d cases for %s", goldenPath, len(out), format)
	}
	return out, sets
}

func TestGolden(t *testing.T) {
	cases, sets := goldenCases(t, Name)
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
			got, err := New().Parse(context.Background(), c.Reply, tools)
			if err != nil {
				t.Fatal(err)
			}
			checkGolden(t, got, c)
		})
	}
}

// checkGolden compares a parse with a golden case's expectation.
func checkGolden(t *testing.T, got toolformat.Parsed, c goldenCase) {
	t.Helper()
	if got.Content != c.Content {
		t.Errorf("content = %q, want %q", got.Content, c.Content)
	}
	if len(got.Calls) != len(c.Calls) {
		t.Fatalf("calls = %+v, want %d calls", got.Calls, len(c.Calls))
	}
	for i, w := range c.Calls {
		if got.Calls[i].Name != w.Name || !sameJSON(got.Calls[i].Arguments, w.Arguments) {
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

// goldenSamples are the golden cases every call of which is read, as
// conformance samples.
func goldenSamples(t testing.TB, format string) []sdktest.ToolFormatSample {
	cases, sets := goldenCases(t, format)
	var out []sdktest.ToolFormatSample
	for _, c := range cases {
		if len(c.Unparsed) > 0 {
			continue
		}
		s := sdktest.ToolFormatSample{Text: c.Reply, Tools: sets[c.Tools]}
		for _, w := range c.Calls {
			s.Want = append(s.Want, toolformat.Call{Name: w.Name, Arguments: w.Arguments})
		}
		out = append(out, s)
	}
	return out
}
