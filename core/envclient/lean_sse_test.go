package envclient

import (
	"encoding/json"
	"strings"
	"testing"
)

// The lean reader skips what the server sends on a call's stream before
// its answer (its own requests, notifications, comments), reads events
// whose data spans lines, with CRLF line ends, and at the stream's end.
func TestReadSSEResponse(t *testing.T) {
	answer := `{"jsonrpc":"2.0","id":"agentenv-7","result":{"content":[{"type":"text","text":"ok"}]}}`
	cases := []struct {
		name, stream string
		err          string
	}{
		{"plain", "event: message\ndata: " + answer + "\n\n", ""},
		{"after a notification and a request", ": comment\n\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{}}\n\n" +
			"data: {\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"roots/list\"}\n\ndata: " + answer + "\n\n", ""},
		{"another call's answer first", "data: {\"jsonrpc\":\"2.0\",\"id\":\"agentenv-6\",\"result\":{}}\n\ndata: " + answer + "\n\n", ""},
		{"data over lines, CRLF", "id: 4\r\ndata: {\"jsonrpc\":\"2.0\",\r\ndata: \"id\":\"agentenv-7\",\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"ok\"}]}}\r\n\r\n", ""},
		{"no blank line at the end", "data: " + answer, ""},
		{"a long line", "data: " + strings.Replace(answer, `"ok"`, `"ok`+strings.Repeat(" ", 10000)+`"`, 1) + "\n\n", ""},
		{"ended before the answer", "data: {\"jsonrpc\":\"2.0\",\"method\":\"x\"}\n\n", "the stream ended before the answer"},
		{"not JSON", "data: {oops\n\n", "reading the answer"},
	}
	for _, c := range cases {
		msg, err := readSSEResponse(strings.NewReader(c.stream), "agentenv-7")
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: err %v, want %q", c.name, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		var res wireResult
		if err := json.Unmarshal(msg.Result, &res); err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		text, err := res.text()
		if err != nil || strings.TrimSpace(text) != "ok" {
			t.Errorf("%s: %q, %v", c.name, text, err)
		}
	}
}
