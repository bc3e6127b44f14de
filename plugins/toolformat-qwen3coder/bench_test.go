package qwen3coder

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentenv/agentenv/plugins/toolformattest"
	"github.com/agentenv/agentenv/sdk/toolformat"
)

// benchTools are the schemas the bench reply's values are typed by.
var benchTools = []toolformat.Tool{
	{Name: "write_file", Parameters: json.RawMessage(`{"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}, "mode": {"type": "integer"}}}`)},
	{Name: "search", Parameters: json.RawMessage(`{"type": "object", "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}, "filters": {"type": "object"}}}`)},
	{Name: "get_weather", Parameters: json.RawMessage(`{"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}, "units": {"type": "string"}}}`)},
}

// benchReply is a 4 KB reply with three calls in the Qwen3-Coder template
// layout: some prose, a file write with a long multi-line value, a search
// with an object value and a call with typed scalars.
func benchReply() string {
	file := strings.Repeat("func main() {\n\tfmt.Println(\"hello, <world> & \\\"friends\\\"\")\n}\n", 24)
	reply := "I will write the file, then search for related issues and check the weather.\n\n" +
		"<tool_call>\n<function=write_file>\n<parameter=path>\nsrc/main.go\n</parameter>\n<parameter=content>\n" + file + "\n</parameter>\n<parameter=mode>\n420\n</parameter>\n</function>\n</tool_call>\n" +
		"<tool_call>\n<function=search>\n<parameter=query>\ngolang println escaping\n</parameter>\n<parameter=limit>\n10\n</parameter>\n<parameter=filters>\n{\"site\": [\"go.dev\", \"github.com\"], \"since\": \"2025-01-01\"}\n</parameter>\n</function>\n</tool_call>\n" +
		"<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n</parameter>\n<parameter=units>\nmetric\n</parameter>\n</function>\n</tool_call><|im_end|>"
	if pad := 4096 - len(reply); pad > 0 {
		reply = strings.Repeat("Thinking it over. ", pad/18+1)[:pad] + reply
	}
	return reply
}

// floorScan is the least any reader of the reply must do: find every tag
// once, left to right.
func floorScan(reply string) int {
	n := 0
	for _, tag := range []string{blockOpen, funcOpen, paramOpen, paramClose, funcClose, blockClose} {
		for pos := 0; ; n++ {
			i := strings.Index(reply[pos:], tag)
			if i < 0 {
				break
			}
			pos += i + len(tag)
		}
	}
	return n
}

// BenchmarkParse: in process. Floor: one strings.Index scan for every tag.
func BenchmarkParse(b *testing.B) {
	reply, ctx, p := benchReply(), context.Background(), New()
	b.SetBytes(int64(len(reply)))
	if got, _ := p.Parse(ctx, reply, benchTools); len(got.Calls) != 3 || len(got.Unparsed) != 0 {
		b.Fatalf("bench reply parses to %+v", got)
	}
	toolformattest.RunPaired(b, func() { _, _ = p.Parse(ctx, reply, benchTools) }, func() { floorScan(reply) })
}

// BenchmarkParsePlugin: through the plugin binary over go-plugin gRPC, as
// the host calls it. Floor: a bare round trip to the same process (Info).
func BenchmarkParsePlugin(b *testing.B) {
	toolformattest.BenchParsePlugin(b, cmdPkg, benchReply(), benchTools, 3)
}
