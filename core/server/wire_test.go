package server

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentenv/agentenv/core/episode"
)

func TestParseReset(t *testing.T) {
	idx := func(n int) *int { return &n }
	cases := []struct {
		name, data string
		want       episode.Request
		wait       float64 // -1 = none given
		err        string
	}{
		{name: "task id", data: `{"task_id":"day/3"}`, want: episode.Request{TaskID: "day/3"}, wait: -1},
		{name: "split index", data: `{"split":"eval","index":4}`, want: episode.Request{Split: "eval", Index: idx(4)}, wait: -1},
		{name: "index alone means all", data: `{"index":0}`, want: episode.Request{Split: "all", Index: idx(0)}, wait: -1},
		{name: "integral float index", data: `{"index":2.0}`, want: episode.Request{Split: "all", Index: idx(2)}, wait: -1},
		{name: "every option", data: `{"task_id":"t","tool_format":"qwen3_coder","max_turns":5,"episode_id":"e1","wait_s":2.5,"seed":7}`,
			want: episode.Request{TaskID: "t", ToolFormat: "qwen3_coder", MaxTurns: 5, EpisodeID: "e1"}, wait: 2.5},
		{name: "absent data", data: ``, err: "task_id: Field required"},
		{name: "empty", data: `{}`, err: "task_id: Field required"},
		{name: "split without index", data: `{"split":"all"}`, err: "split needs an index"},
		{name: "both", data: `{"task_id":"t","split":"all","index":1}`, err: "not both"},
		{name: "negative index", data: `{"index":-1}`, err: "greater than or equal to 0"},
		{name: "string index", data: `{"index":"1"}`, err: "valid integer"},
		{name: "fraction", data: `{"index":0.5}`, err: "valid integer"},
		{name: "huge index", data: `{"index":1e300}`, err: "valid integer"},
		{name: "number task id", data: `{"task_id":5}`, err: "task_id: Input should be a valid string"},
		{name: "negative wait", data: `{"task_id":"t","wait_s":-1}`, err: "wait_s"},
		{name: "string wait", data: `{"task_id":"t","wait_s":"1"}`, err: "wait_s"},
		{name: "long episode id", data: `{"task_id":"t","episode_id":"` + strings.Repeat("e", 256) + `"}`, err: "at most 255"},
		{name: "negative max turns", data: `{"task_id":"t","max_turns":-2}`, err: "max_turns"},
		{name: "unknown key", data: `{"task_id":"t","temperature":1}`, err: "data.temperature: Extra inputs are not permitted"},
		{name: "not an object", data: `[1]`, err: "data must be a JSON object"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rd, werr := parseReset(json.RawMessage(tc.data), tc.data != "")
			if tc.err != "" {
				if werr == nil || werr.Code != CodeValidation || !strings.Contains(werr.Message, tc.err) || len(werr.Errors) == 0 {
					t.Fatalf("got %+v, want VALIDATION_ERROR with %q", werr, tc.err)
				}
				return
			}
			if werr != nil {
				t.Fatal(werr)
			}
			gotJSON, _ := json.Marshal(rd.Req)
			wantJSON, _ := json.Marshal(tc.want)
			if string(gotJSON) != string(wantJSON) {
				t.Fatalf("got %s, want %s", gotJSON, wantJSON)
			}
			if (tc.wait < 0) != (rd.WaitS == nil) || (rd.WaitS != nil && *rd.WaitS != tc.wait) {
				t.Fatalf("wait %v, want %v", rd.WaitS, tc.wait)
			}
		})
	}
}

func TestParseStep(t *testing.T) {
	cases := []struct{ name, data, reply, err string }{
		{name: "reply", data: `{"reply":"hi <tool_call>"}`, reply: "hi <tool_call>"},
		{name: "empty reply", data: `{"reply":""}`, reply: ""},
		{name: "absent", data: ``, err: "data is required"},
		{name: "no reply", data: `{}`, err: "data.reply: Field required"},
		{name: "mcp action", data: `{"type":"call_tool","tool_name":"x"}`, err: "MCP actions are not served"},
		{name: "number", data: `{"reply":1}`, err: "valid string"},
		{name: "extra", data: `{"reply":"x","metadata":{}}`, err: "data.metadata"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			reply, werr := parseStep(json.RawMessage(tc.data), tc.data != "")
			if tc.err != "" {
				if werr == nil || !strings.Contains(werr.Message, tc.err) {
					t.Fatalf("got %+v, want %q", werr, tc.err)
				}
				return
			}
			if werr != nil || reply != tc.reply {
				t.Fatalf("got %q %v", reply, werr)
			}
		})
	}
}

func TestEncodeObservation(t *testing.T) {
	r := 0.75
	cases := []struct {
		name string
		obs  episode.Observation
		want string
	}{
		{"opening", episode.Observation{EpisodeID: "e", TaskID: "t", Messages: []episode.Message{{Role: "user", Content: "go"}}},
			`{"type":"observation","data":{"observation":{"episode_id":"e","task_id":"t","messages":[{"role":"user","content":"go"}],"turn":0},"reward":null,"done":false}}`},
		{"no messages", episode.Observation{EpisodeID: "e", TaskID: "t", Turn: 2},
			`{"type":"observation","data":{"observation":{"episode_id":"e","task_id":"t","messages":[],"turn":2},"reward":null,"done":false}}`},
		{"done", episode.Observation{EpisodeID: "e", TaskID: "t", Turn: 3, Done: true, Reward: &r, Metrics: map[string]float64{"tool_calls": 2}},
			`{"type":"observation","data":{"observation":{"episode_id":"e","task_id":"t","messages":[],"turn":3,"metrics":{"tool_calls":2}},"reward":0.75,"done":true}}`},
		{"reward only when done", episode.Observation{EpisodeID: "e", TaskID: "t", Reward: &r},
			`{"type":"observation","data":{"observation":{"episode_id":"e","task_id":"t","messages":[],"turn":0},"reward":null,"done":false}}`},
	}
	for _, tc := range cases {
		b, err := encodeObservation(tc.obs)
		if err != nil || string(b) != tc.want {
			t.Errorf("%s:\n got %s %v\nwant %s", tc.name, b, err, tc.want)
		}
	}
	inf := 1 / func() float64 { return 0 }()
	if _, err := encodeObservation(episode.Observation{Done: true, Reward: &inf}); err == nil {
		t.Error("infinite reward encoded")
	}
}

func TestEncodeError(t *testing.T) {
	got := string(encodeError(&wireError{Code: CodeCapacity, Message: "full", Extra: map[string]any{"max_sessions": 2}}))
	if got != `{"type":"error","data":{"code":"CAPACITY_REACHED","max_sessions":2,"message":"full"}}` {
		t.Fatalf("got %s", got)
	}
}
