// Package qwen3coder reads tool calls written in the XML-like format that
// Qwen3-Coder and Qwen3.5 are trained on:
//
//	<tool_call>
//	<function=get_weather>
//	<parameter=city>
//	Paris
//	</parameter>
//	</function>
//	</tool_call>
//
// Values are typed by the tool's JSON Schema the way vLLM's `qwen3_coder`
// tool parser (main branch) types them, after its Qwen3 reasoning parser. A call vLLM cannot read, or whose value cannot be
// read as its type, is returned as unparsed with the reason instead of
// being dropped or passed on as a string (see docs/tool-formats.md).
package qwen3coder

import (
	"context"

	"github.com/agentenv/agentenv/sdk"
	"github.com/agentenv/agentenv/sdk/toolformat"
)

// Name is the format's name, as vLLM's --tool-call-parser spells it.
const Name = "qwen3_coder"

// Version is this plugin's version.
const Version = "0.1.0"

// Plugin is the qwen3_coder tool-call format. It is stateless and safe for
// concurrent use.
type Plugin struct{}

var _ toolformat.Plugin = Plugin{}

// New returns the qwen3_coder format.
func New() Plugin { return Plugin{} }

// Info describes the plugin; it takes no configuration.
func (Plugin) Info() sdk.Info {
	return sdk.Info{Name: Name, Kind: sdk.KindToolFormat, Version: Version}
}

// Parse reads the tool calls in a reply, typing each value by the schema
// of the tool of that name in tools.
// A step that ends (ctx) stops the reading, with ctx's error.
func (Plugin) Parse(ctx context.Context, text string, tools []toolformat.Tool) (toolformat.Parsed, error) {
	r := toolformat.SplitReply(text)
	out, err := parse(ctx, r.Content, tools)
	if err != nil {
		return toolformat.Parsed{}, err
	}
	if lost := unreadBefore(r.Before); len(lost) > 0 {
		out.Unparsed = append(lost, out.Unparsed...)
	}
	return out, nil
}
