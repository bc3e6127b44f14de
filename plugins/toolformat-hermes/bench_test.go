package hermes

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentenv/agentenv/plugins/toolformattest"
)

// benchReply is a 4 KB reply with three calls in the Qwen3 template
// layout: some prose, a file write with a long multi-line string, a search
// and a call with nested arguments.
func benchReply() string {
	file := strings.Repeat("func main() {\n\tfmt.Println(\"hello, <world> & \\\"friends\\\"\")\n}\n", 22)
	fileJSON, _ := json.Marshal(file)
	reply := "I will write the file, then search for related issues and check the weather.\n" +
		`<tool_call>` + "\n" + `{"name": "write_file", "arguments": {"path": "src/main.go", "content": ` + string(fileJSON) + `, "mode": 420}}` + "\n</tool_call>\n" +
		`<tool_call>` + "\n" + `{"name": "search", "arguments": {"query": "golang println escaping", "limit": 10, "filters": {"site": ["go.dev", "github.com"], "since": "2025-01-01"}}}` + "\n</tool_call>\n" +
		`<tool_call>` + "\n" + `{"name": "get_weather", "arguments": {"city": "Paris", "days": 3, "units": "metric"}}` + "\n</tool_call><|im_end|>"
	if pad := 4096 - len(reply); pad > 0 {
		reply = strings.Repeat("Thinking it over. ", pad/18+1)[:pad] + reply
	}
	return reply
}

// floorScan is the least any reader of the reply must do: find every tag
// and check each block's JSON once.
func floorScan(reply string) int {
	n := 0
	for pos := 0; ; {
		i := strings.Index(reply[pos:], openTag)
		if i < 0 {
			return n
		}
		start := pos + i + len(openTag)
		j := strings.Index(reply[start:], closeTag)
		if j < 0 {
			return n
		}
		if json.Valid([]byte(reply[start : start+j])) {
			n++
		}
		pos = start + j + len(closeTag)
	}
}

// BenchmarkParse: in process. Floor: one tag scan plus json.Valid of each
// block.
func BenchmarkParse(b *testing.B) {
	reply, ctx, p := benchReply(), context.Background(), New()
	b.SetBytes(int64(len(reply)))
	if got, _ := p.Parse(ctx, reply, nil); len(got.Calls) != 3 || floorScan(reply) != 3 {
		b.Fatalf("bench reply parses to %+v", got)
	}
	toolformattest.RunPaired(b, func() { _, _ = p.Parse(ctx, reply, nil) }, func() { floorScan(reply) })
}

// BenchmarkParsePlugin: through the plugin binary over go-plugin gRPC, as
// the host calls it. Floor: a bare round trip to the same process (Info).
func BenchmarkParsePlugin(b *testing.B) {
	toolformattest.BenchParsePlugin(b, cmdPkg, benchReply(), nil, 3)
}
