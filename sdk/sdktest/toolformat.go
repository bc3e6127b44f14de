package sdktest

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/agentenv/agentenv/sdk"
	"github.com/agentenv/agentenv/sdk/toolformat"
)

// ToolFormatSample is a reply in the plugin's format and the calls it must
// read from it.
type ToolFormatSample struct {
	Text  string
	Tools []toolformat.Tool
	Want  []toolformat.Call // arguments compared as JSON values
}

// ToolFormatConformance runs the tool-format conformance suite against p,
// served over real gRPC in-process. Samples, if given, must parse to
// exactly their calls.
func ToolFormatConformance(t *testing.T, p toolformat.Plugin, samples ...ToolFormatSample) {
	t.Helper()
	c := ToolFormat(t, p)
	runChecks(t, append(infoChecks(c, sdk.KindToolFormat), toolFormatChecks(c, samples)...))
}

var conformanceTools = []toolformat.Tool{{
	Name:        "get_weather",
	Description: "Weather for a city.",
	Parameters:  json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}},"required":["city"]}`),
}}

// awkwardReplies are replies any format must survive: none may make the
// parser fail, hang, or return a malformed result.
var awkwardReplies = []string{
	"",
	"The answer is 42.",
	"<tool_call>",
	"</tool_call>",
	"<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}</tool_call>",
	"<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>",
	"<tool_call>{not json</tool_call> trailing",
	"<function=get_weather><parameter=days>many</parameter>",
	"<think>hmm <tool_call></think>done",
	"\xff\xfe invalid utf-8 \xc3",
	strings.Repeat("<tool_call>", 500),
	strings.Repeat("<tool_call>{\"name\":\"x\"}</tool_call>", 200),
}

func validParsed(p toolformat.Parsed) error {
	for i, c := range p.Calls {
		if c.Name == "" {
			return fmt.Errorf("call %d has no name", i)
		}
		var obj map[string]any
		if err := json.Unmarshal(c.Arguments, &obj); err != nil || obj == nil {
			return fmt.Errorf("call %d (%s) arguments are not a JSON object: %s", i, c.Name, c.Arguments)
		}
	}
	for i, u := range p.Unparsed {
		if strings.TrimSpace(u.Reason) == "" {
			return fmt.Errorf("unparsed call %d has no reason", i)
		}
	}
	return nil
}

func toolFormatChecks(c toolformat.Parser, samples []ToolFormatSample) []check {
	return []check{
		{"plain text has no calls", func(ctx context.Context) error {
			text := "The answer is 42."
			p, err := c.Parse(ctx, text, conformanceTools)
			if err != nil {
				return err
			}
			if len(p.Calls)+len(p.Unparsed) != 0 || !strings.Contains(p.Content, text) {
				return fmt.Errorf("Parse(%q) = %+v, want the text as content and no calls", text, p)
			}
			return nil
		}},
		{"awkward replies", func(ctx context.Context) error {
			for _, text := range awkwardReplies {
				p, err := c.Parse(ctx, text, conformanceTools)
				if err != nil {
					return fmt.Errorf("Parse(%.40q): %w", text, err)
				}
				if err := validParsed(p); err != nil {
					return fmt.Errorf("Parse(%.40q): %w", text, err)
				}
			}
			return nil
		}},
		{"large reply", func(ctx context.Context) error {
			text := strings.Repeat("some text <tool_call>{\"name\": \"get_weather\"", 20000)
			p, err := c.Parse(ctx, text, conformanceTools)
			if err != nil {
				return fmt.Errorf("Parse of %d bytes: %w", len(text), err)
			}
			return validParsed(p)
		}},
		{"deterministic and concurrent", func(ctx context.Context) error {
			want := make([]toolformat.Parsed, len(awkwardReplies))
			for i, text := range awkwardReplies {
				p, err := c.Parse(ctx, text, conformanceTools)
				if err != nil {
					return err
				}
				want[i] = p
			}
			var wg sync.WaitGroup
			errs := make(chan error, 16)
			for g := 0; g < 16; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i, text := range awkwardReplies {
						p, err := c.Parse(ctx, text, conformanceTools)
						if err != nil {
							errs <- err
							return
						}
						if !reflect.DeepEqual(p, want[i]) {
							errs <- fmt.Errorf("Parse(%.40q) differs between calls: %+v vs %+v", text, p, want[i])
							return
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			return <-errs
		}},
		{"samples", func(ctx context.Context) error {
			for _, s := range samples {
				p, err := c.Parse(ctx, s.Text, s.Tools)
				if err != nil {
					return fmt.Errorf("Parse(%.60q): %w", s.Text, err)
				}
				if len(p.Calls) != len(s.Want) {
					return fmt.Errorf("Parse(%.60q) read %d calls, want %d: %+v", s.Text, len(p.Calls), len(s.Want), p)
				}
				for i, w := range s.Want {
					if err := sameCall(p.Calls[i], w); err != nil {
						return fmt.Errorf("Parse(%.60q) call %d: %w", s.Text, i, err)
					}
				}
			}
			return nil
		}},
	}
}

func sameCall(got, want toolformat.Call) error {
	if got.Name != want.Name {
		return fmt.Errorf("name %q, want %q", got.Name, want.Name)
	}
	var g, w any
	if err := json.Unmarshal(got.Arguments, &g); err != nil {
		return fmt.Errorf("arguments %s: %w", got.Arguments, err)
	}
	if err := json.Unmarshal(want.Arguments, &w); err != nil {
		return fmt.Errorf("wanted arguments %s: %w", want.Arguments, err)
	}
	if !reflect.DeepEqual(g, w) {
		return fmt.Errorf("arguments %s, want %s", got.Arguments, want.Arguments)
	}
	return nil
}
