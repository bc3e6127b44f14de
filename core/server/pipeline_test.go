package server

import (
	"testing"
	"time"
)

// A client that sends several frames while a long step runs must still
// get every answer, and the frames queued behind the step must not count
// against the peer's read deadline.
func TestPipelinedFramesBehindLongStep(t *testing.T) {
	p := newFakePlayer()
	ts := startServer(t, Options{Player: p, PingInterval: 200 * time.Millisecond, PongTimeout: 300 * time.Millisecond})
	c := ts.dial(t, "")
	c.observation(t, `{"type":"reset","data":{"task_id":"quiz"}}`)
	c.sendRaw(t, `{"type":"step","data":{"reply":"sleep:2000"}}`)
	const queued = 8
	for range queued {
		time.Sleep(50 * time.Millisecond)
		c.sendRaw(t, `{"type":"state"}`)
	}
	if r := c.recv(t); r.Type != "observation" {
		t.Fatalf("long step: got %s %s", r.Type, r.Data)
	}
	for i := range queued {
		if r := c.recv(t); r.Type != "state" {
			t.Fatalf("pipelined state %d: got %s %s", i, r.Type, r.Data)
		}
	}
}
