package envclient

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// cut runs an answer through the cutter as the transport does.
func cut(t *testing.T, answer string, limit int64, sse bool) (string, int64) {
	t.Helper()
	c := &callCut{limit: limit}
	r := &cutReader{src: io.NopCloser(strings.NewReader(answer)), j: newJSONCut(c), sse: sse, lineStart: sse}
	out, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(out), c.cut.Load()
}

// What the cutter leaves is still a tool result the SDK decodes: images'
// base64 cut to whole quads, a flood of tiny parts cut past the slack,
// and SSE framing kept around the cut data lines.
func TestCutterKeepsAnswersDecodable(t *testing.T) {
	img := base64.StdEncoding.EncodeToString(make([]byte, 3000))
	var many strings.Builder
	many.WriteString(`{"jsonrpc":"2.0","id":3,"result":{"content":[`)
	for i := range 200_000 {
		if i > 0 {
			many.WriteByte(',')
		}
		many.WriteString(`{"type":"text","text":"part"}`)
	}
	many.WriteString(`],"isError":false}}`)
	tests := []struct {
		name     string
		answer   string
		sse      bool
		maxBytes int
		check    func(*mcp.CallToolResult) error
	}{
		{"image data cut to whole quads", `{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"image","mimeType":"image/png","data":"` + img + `"}]}}`,
			false, 1000, func(r *mcp.CallToolResult) error {
				if d := r.Content[0].(*mcp.ImageContent).Data; len(d) == 0 || len(d) >= 3000 {
					return fmt.Errorf("image of %d bytes", len(d))
				}
				return nil
			}},
		{"a flood of tiny parts", many.String(), false, 2 << 20, func(r *mcp.CallToolResult) error {
			if len(r.Content) == 0 || len(r.Content) >= 200_000 {
				return fmt.Errorf("%d parts kept", len(r.Content))
			}
			return nil
		}},
		{"sse framing", "event: message\nid: 7\ndata: " + `{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"` + strings.Repeat("y", 5000) + `"}]}}` + "\n\n",
			true, 1500, func(r *mcp.CallToolResult) error {
				if n := len(r.Content[0].(*mcp.TextContent).Text); n != 256 {
					return fmt.Errorf("kept %d bytes of text", n)
				}
				return nil
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, dropped := cut(t, tc.answer, 10, tc.sse)
			if dropped == 0 || len(out) > tc.maxBytes {
				t.Fatalf("kept %d bytes, dropped %d", len(out), dropped)
			}
			if tc.sse {
				if !strings.HasPrefix(out, "event: message\nid: 7\ndata: ") || !strings.HasSuffix(out, "}\n\n") {
					t.Fatalf("SSE framing lost: %.60q ... %q", out, out[len(out)-10:])
				}
				out = strings.TrimSuffix(strings.TrimPrefix(out, "event: message\nid: 7\ndata: "), "\n\n")
			}
			var msg struct {
				Result json.RawMessage `json:"result"`
			}
			if err := json.Unmarshal([]byte(out), &msg); err != nil {
				t.Fatalf("cut answer is not JSON: %v", err)
			}
			var res mcp.CallToolResult
			if err := json.Unmarshal(msg.Result, &res); err != nil {
				t.Fatalf("cut answer is not a tool result: %v", err)
			}
			if err := tc.check(&res); err != nil {
				t.Fatal(err)
			}
		})
	}
}
