package server

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

var fuzzSeeds = []string{
	`{"type":"reset","data":{"split":"all","index":0}}`,
	`{"type":"reset","data":{"task_id":"day/1","max_turns":2,"wait_s":0.5,"seed":3}}`,
	`{"type":"step","data":{"reply":"<tool_call>{}</tool_call>"}}`,
	`{"type":"step","data":{"reply":"done"}}`,
	`{"type":"state"}`, `{"type":"close","data":{}}`, `{"type":"mcp","data":{"jsonrpc":"2.0"}}`,
	`{"type":"reset","data":{"index":1e999}}`, `{"type":"reset","data":{"index":-0}}`,
	`{"type":"step","data":{"reply":"\ud800"}}`, `{"type":7}`, `{}`, `[]`, `null`, `"x"`, ``, `{"type":"reset"`,
}

// FuzzParse: no input makes the wire layer panic, every refusal carries a
// code and a message, and what it accepts is well formed.
func FuzzParse(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		msg, werr := parseInbound(frame)
		if werr != nil {
			if werr.Code == "" || werr.Message == "" {
				t.Fatalf("error without code or message: %+v", werr)
			}
			var back map[string]any
			if err := json.Unmarshal(encodeError(werr), &back); err != nil {
				t.Fatalf("error reply is not JSON: %v", err)
			}
			return
		}
		switch msg.Type {
		case "reset":
			rd, werr := parseReset(msg.Data, msg.HasData)
			if werr != nil {
				if werr.Code != CodeValidation || len(werr.Errors) == 0 {
					t.Fatalf("reset refusal %+v", werr)
				}
				return
			}
			if (rd.Req.TaskID == "") == (rd.Req.Index == nil) || (rd.Req.Index != nil && *rd.Req.Index < 0) || rd.Req.MaxTurns < 0 {
				t.Fatalf("accepted a bad reset: %+v", rd.Req)
			}
			if rd.WaitS != nil && *rd.WaitS < 0 {
				t.Fatalf("negative wait accepted")
			}
		case "step":
			if _, werr := parseStep(msg.Data, msg.HasData); werr != nil && werr.Code != CodeValidation {
				t.Fatalf("step refusal %+v", werr)
			}
		}
	})
}

// FuzzSession sends each input as a frame to a live session on a real
// server: every frame gets exactly one reply (or, for close, a close), and
// the session still plays afterwards.
func FuzzSession(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	p := newFakePlayer()
	ts := startServer(f, Options{Player: p})
	f.Fuzz(func(t *testing.T, frame string) {
		if strings.Contains(frame, "sleep:") {
			return // the fake player's hook for slow steps
		}
		c, _, err := ts.tryDial("")
		if err != nil {
			t.Fatal(err)
		}
		defer c.conn.Close()
		c.conn.WriteMessage(websocket.TextMessage, []byte(frame))
		c.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, b, err := c.conn.ReadMessage()
		if err != nil {
			if websocket.IsCloseError(err, websocket.CloseNormalClosure) {
				return // it was a close
			}
			t.Fatalf("no reply to %q: %v", frame, err)
		}
		var r struct {
			Type string         `json:"type"`
			Data map[string]any `json:"data"`
		}
		if err := json.Unmarshal(b, &r); err != nil || r.Data == nil {
			t.Fatalf("reply %q to %q", b, frame)
		}
		if r.Type == "error" && (r.Data["code"] == nil || r.Data["message"] == nil) {
			t.Fatalf("error without code or message: %s", b)
		}
		c.conn.WriteMessage(websocket.TextMessage, []byte(`{"type":"reset","data":{"task_id":"quiz"}}`))
		if _, b, err := c.conn.ReadMessage(); err != nil || !strings.HasPrefix(string(b), `{"type":"observation"`) {
			t.Fatalf("after %q the session no longer plays: %s %v", frame, b, err)
		}
	})
}
