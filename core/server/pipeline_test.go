package server

import (
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// A client that sends several frames while a long step runs must still
// get every answer, and the frames queued behind the step must not count
// against the peer's read deadline.
func TestPipelinedFramesBehindLongStep(t *testing.T) {
	p := newFakePlayer()
	ts := startServer(t, Options{Player: p, PingInterval: 200 * time.Millisecond, PongTimeout: 300 * time.Millisecond})
	c := ts.dial(t, "")
	c.observation(t, `{"type":"reset","data":{"task_id":"quiz"}}`)
	// Frames queue behind a held step while the server's pings come and
	// go: the step is let go only after five more pings (1 s, twice the
	// read deadline), counted as they arrive rather than slept for.
	pings := make(chan struct{}, 64)
	c.conn.SetPingHandler(func(data string) error {
		select {
		case pings <- struct{}{}:
		default:
		}
		return c.conn.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(guard))
	})
	replies := readAll(c) // from here on pings are answered
	c.sendRaw(t, `{"type":"step","data":{"reply":"hold"}}`)
	p.waitStep(t, "hold")
	for len(pings) > 0 {
		<-pings
	}
	const queued = 8
	for range queued {
		c.sendRaw(t, `{"type":"state"}`)
	}
	for i := range 5 {
		select {
		case <-pings:
		case <-time.After(guard):
			t.Fatalf("ping %d never came", i+1)
		}
	}
	p.release()
	if r := next(t, replies); r.Type != "observation" {
		t.Fatalf("long step: got %s %s", r.Type, r.Data)
	}
	for i := range queued {
		if r := next(t, replies); r.Type != "state" {
			t.Fatalf("pipelined state %d: got %s %s", i, r.Type, r.Data)
		}
	}
}
