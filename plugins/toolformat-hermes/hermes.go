// Package hermes reads tool calls written in the Hermes format that Qwen2.5
// and Qwen3 are trained on:
//
//	<tool_call>
//	{"name": "get_weather", "arguments": {"city": "Paris"}}
//	</tool_call>
//
// It reads a reply the way vLLM's `hermes` tool parser (main branch) reads
// it after its Qwen3 reasoning parser, except that a call vLLM cannot read,
// or would pass on as arguments that are not a JSON object, is returned as
// unparsed with the reason instead of failing every call in the reply (see
// docs/tool-formats.md).
package hermes

import (
	"context"

	"github.com/agentenv/agentenv/sdk"
	"github.com/agentenv/agentenv/sdk/toolformat"
)

// Name is the format's name, as vLLM's --tool-call-parser spells it.
const Name = "hermes"

// Version is this plugin's version.
const Version = "0.1.0"

// Plugin is the hermes tool-call format. It is stateless and safe for
// concurrent use.
type Plugin struct{}

var _ toolformat.Plugin = Plugin{}

// New returns the hermes format.
func New() Plugin { return Plugin{} }

// Info describes the plugin; it takes no configuration.
func (Plugin) Info() sdk.Info {
	return sdk.Info{Name: Name, Kind: sdk.KindToolFormat, Version: Version}
}

// Parse reads the tool calls in a reply. The tools are not consulted:
// like vLLM, hermes neither checks names against them nor validates
// arguments (a Hermes call carries its own JSON types).
// A step that ends (ctx) stops the reading, with ctx's error.
func (Plugin) Parse(ctx context.Context, text string, _ []toolformat.Tool) (toolformat.Parsed, error) {
	r := toolformat.SplitReply(text)
	out, err := parse(ctx, r.Content)
	if err != nil {
		return toolformat.Parsed{}, err
	}
	if lost := unreadBefore(r.Before); len(lost) > 0 {
		out.Unparsed = append(lost, out.Unparsed...)
	}
	return out, nil
}
