package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/agentenv/agentenv/sdk/sdktest/wait"

	"github.com/gorilla/websocket"
)

// genericClient speaks to /ws exactly as OpenEnv's GenericEnvClient does
// (research/openenv-protocol.md §3, §6): frames are Python's json.dumps
// output (", " and ": " separators), no subprotocol, permessage-deflate
// offered, any "error" reply raised, close sent without data and answered
// by nothing.
type genericClient struct {
	t    *testing.T
	conn *websocket.Conn
}

func dialGeneric(t *testing.T, addr string) *genericClient {
	t.Helper()
	d := websocket.Dialer{EnableCompression: true, HandshakeTimeout: 10 * time.Second}
	conn, resp, err := d.Dial("ws://"+addr+"/ws", nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	if got := resp.Header.Get("Sec-WebSocket-Protocol"); got != "" {
		t.Fatalf("server chose subprotocol %q for a client that offered none", got)
	}
	t.Cleanup(func() { conn.Close() })
	return &genericClient{t: t, conn: conn}
}

// sendAndReceive mirrors EnvClient._send_and_receive: one frame out, one
// in, errors raised as "Server error: <message> (code: <code>)".
func (c *genericClient) sendAndReceive(frame string) (map[string]any, error) {
	c.t.Helper()
	if err := c.conn.WriteMessage(websocket.TextMessage, []byte(frame)); err != nil {
		c.t.Fatalf("send %s: %v", frame, err)
	}
	c.conn.SetReadDeadline(time.Now().Add(60 * time.Second)) // message_timeout_s
	kind, b, err := c.conn.ReadMessage()
	if err != nil {
		c.t.Fatalf("recv after %s: %v", frame, err)
	}
	if kind != websocket.TextMessage {
		c.t.Fatalf("reply to %s is not a text frame", frame)
	}
	var resp map[string]any
	if err := json.Unmarshal(b, &resp); err != nil {
		c.t.Fatalf("reply to %s is not JSON: %q", frame, b)
	}
	if keys := sortedKeys(resp); !reflect.DeepEqual(keys, []string{"data", "type"}) {
		c.t.Fatalf("reply to %s has keys %v, want [data type]", frame, keys)
	}
	data, ok := resp["data"].(map[string]any)
	if !ok {
		c.t.Fatalf("reply to %s: data is not an object: %s", frame, b)
	}
	if resp["type"] == "error" {
		return nil, fmt.Errorf("Server error: %v (code: %v)", data["message"], data["code"])
	}
	return resp, nil
}

// stepResult mirrors GenericEnvClient._parse_result.
type stepResult struct {
	observation map[string]any
	reward      any
	done        bool
}

func (c *genericClient) parseResult(resp map[string]any) stepResult {
	c.t.Helper()
	if resp["type"] != "observation" {
		c.t.Fatalf("got %v, want an observation", resp["type"])
	}
	data := resp["data"].(map[string]any)
	if keys := sortedKeys(data); !reflect.DeepEqual(keys, []string{"done", "observation", "reward"}) {
		c.t.Fatalf("observation data keys %v, want [done observation reward]", keys)
	}
	obs, ok := data["observation"].(map[string]any)
	if !ok {
		c.t.Fatalf("observation is not an object: %v", data["observation"])
	}
	for _, k := range []string{"done", "reward", "metadata"} {
		if _, in := obs[k]; in {
			c.t.Fatalf("observation carries %q, which OpenEnv serializes outside it", k)
		}
	}
	switch data["reward"].(type) {
	case nil, float64:
	default:
		c.t.Fatalf("reward %v is neither a number nor null", data["reward"])
	}
	done, ok := data["done"].(bool)
	if !ok {
		c.t.Fatalf("done %v is not a bool", data["done"])
	}
	return stepResult{observation: obs, reward: data["reward"], done: done}
}

func (c *genericClient) reset(kwargs string) (stepResult, error) {
	resp, err := c.sendAndReceive(`{"type": "reset", "data": ` + kwargs + `}`)
	if err != nil {
		return stepResult{}, err
	}
	return c.parseResult(resp), nil
}

func (c *genericClient) step(action string) (stepResult, error) {
	resp, err := c.sendAndReceive(`{"type": "step", "data": ` + action + `}`)
	if err != nil {
		return stepResult{}, err
	}
	return c.parseResult(resp), nil
}

func (c *genericClient) state() map[string]any {
	c.t.Helper()
	resp, err := c.sendAndReceive(`{"type": "state"}`)
	if err != nil {
		c.t.Fatal(err)
	}
	if resp["type"] != "state" {
		c.t.Fatalf("got %v, want state", resp["type"])
	}
	return resp["data"].(map[string]any)
}

// close mirrors disconnect(): send close, then close the socket with 1000.
// The server must send no data frame in reply, and close with 1000 itself.
func (c *genericClient) close() {
	c.t.Helper()
	if err := c.conn.WriteMessage(websocket.TextMessage, []byte(`{"type": "close"}`)); err != nil {
		c.t.Fatal(err)
	}
	c.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	kind, b, err := c.conn.ReadMessage()
	if err == nil {
		c.t.Fatalf("server answered close with a %d frame %q", kind, b)
	}
	if !websocket.IsCloseError(err, websocket.CloseNormalClosure) {
		c.t.Fatalf("after close: %v, want close 1000", err)
	}
	c.conn.Close()
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func TestGenericEnvClientExchange(t *testing.T) {
	p := newFakePlayer()
	ts := startServer(t, Options{Player: p})
	c := dialGeneric(t, ts.addr)

	// client.reset() with no kwargs: an OpenEnv RuntimeError, session open.
	if _, err := c.reset(`{}`); err == nil || err.Error() != "Server error: Invalid reset: data.task_id: Field required: reset needs task_id, or split and index (code: VALIDATION_ERROR)" {
		t.Fatalf("reset without task: %v", err)
	}
	r, err := c.reset(`{"split": "all", "index": 2, "seed": 42, "episode_id": "ep-openenv"}`)
	if err != nil {
		t.Fatal(err)
	}
	if r.done || r.reward != nil || r.observation["episode_id"] != "ep-openenv" || r.observation["task_id"] != "quiz" {
		t.Fatalf("reset: %+v", r)
	}
	st := c.state()
	if st["episode_id"] != "ep-openenv" || st["step_count"] != 0.0 {
		t.Fatalf("state after reset: %v", st)
	}
	r, err = c.step(`{"reply": "<tool_call>\n{\"name\": \"submit\", \"arguments\": {}}\n</tool_call>"}`)
	if err != nil || r.done {
		t.Fatalf("step: %+v %v", r, err)
	}
	if st := c.state(); st["step_count"] != 1.0 {
		t.Fatalf("state after a step: %v", st)
	}
	// MCPToolClient-style actions are refused with a reason, not a crash.
	if _, err := c.step(`{"type": "list_tools"}`); err == nil {
		t.Fatal("list_tools action accepted")
	}
	r, err = c.step(`{"reply": "done"}`)
	if err != nil || !r.done || r.reward != 1.0 {
		t.Fatalf("final step: %+v %v", r, err)
	}
	metrics, ok := r.observation["metrics"].(map[string]any)
	if !ok || metrics["score/grade"] != 1.0 {
		t.Fatalf("final observation metrics: %v", r.observation)
	}
	if st := c.state(); st["step_count"] != 2.0 || st["done"] != true {
		t.Fatalf("state after done: %v", st)
	}
	c.close()
	wait.Until(t, "episode closed", func() bool { _, _, live, _ := p.counts(); return live == 0 })
}

// The readiness poll of from_docker_image / AutoEnv: GET /health answers
// 200 {"status":"healthy"} with no credentials, even with a token set.
func TestHealthForReadinessPollers(t *testing.T) {
	ts := startServer(t, Options{Token: testToken})
	resp, err := http.Get(ts.url("/health"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	json.NewDecoder(resp.Body).Decode(&body)
	if resp.StatusCode != 200 || !reflect.DeepEqual(body, map[string]any{"status": "healthy"}) {
		t.Fatalf("health: %d %v", resp.StatusCode, body)
	}
}
