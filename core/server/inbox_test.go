package server

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// readAll collects the client's replies in the background; the client
// must be reading for its pong handler to run.
func readAll(c *wsClient) <-chan reply {
	out := make(chan reply, 64)
	go func() {
		defer close(out)
		for {
			_, b, err := c.conn.ReadMessage()
			if err != nil {
				return
			}
			var r reply
			if json.Unmarshal(b, &r) == nil {
				out <- r
			}
		}
	}()
	return out
}

func next(t *testing.T, replies <-chan reply) reply {
	t.Helper()
	select {
	case r, ok := <-replies:
		if !ok {
			t.Fatal("the connection closed")
		}
		return r
	case <-time.After(guard):
		t.Fatalf("no reply in %s", guard)
		return reply{}
	}
}

// A ping sent while a long step runs, with frames queued behind the step,
// is answered at once (OpenEnv's Python client drops a connection after
// 20 s without a pong), and the queued frames are then answered in order.
func TestPingsAnsweredBehindQueuedFrames(t *testing.T) {
	p := newFakePlayer()
	ts := startServer(t, Options{Player: p})
	c := ts.dial(t, "")
	c.observation(t, `{"type":"reset","data":{"task_id":"day/1"}}`)
	pong := make(chan time.Time, 1)
	c.conn.SetPongHandler(func(string) error {
		select {
		case pong <- time.Now():
		default:
		}
		return nil
	})
	replies := readAll(c)
	c.sendRaw(t, `{"type":"step","data":{"reply":"hold"}}`)
	for i := range 8 {
		c.sendRaw(t, fmt.Sprintf(`{"type":"step","data":{"reply":"r%d"}}`, i))
	}
	// The ping follows the frames on the wire, so the server has read them
	// all when it answers; the step is held until the pong came.
	if err := c.conn.WriteControl(websocket.PingMessage, []byte("p"), time.Now().Add(guard)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-pong:
	case <-time.After(guard):
		t.Fatal("no pong while a step ran with 8 frames queued behind it")
	}
	p.release()
	if r := next(t, replies); r.Type != "observation" {
		t.Fatalf("the long step: %s %s", r.Type, r.Data)
	}
	for i := range 8 {
		if r := next(t, replies); r.Type != "observation" || !strings.Contains(string(r.Data), fmt.Sprintf("echo: r%d", i)) {
			t.Fatalf("queued frame %d: %s %s", i, r.Type, r.Data)
		}
	}
}

// Past MaxQueuedFrames a frame is not kept: it gets QUEUE_FULL in its
// turn, so every request still has exactly one reply, in order.
func TestQueueFullFramesAnsweredInOrder(t *testing.T) {
	p := newFakePlayer()
	ts := startServer(t, Options{Player: p, MaxQueuedFrames: 4})
	c := ts.dial(t, "")
	c.observation(t, `{"type":"reset","data":{"task_id":"day/1"}}`)
	pong := make(chan struct{}, 1)
	c.conn.SetPongHandler(func(string) error { pong <- struct{}{}; return nil })
	replies := readAll(c)
	c.sendRaw(t, `{"type":"step","data":{"reply":"hold"}}`)
	p.waitStep(t, "hold") // the step is running, the queue empty
	for i := range 10 {
		c.sendRaw(t, fmt.Sprintf(`{"type":"step","data":{"reply":"r%d"}}`, i))
	}
	// A pong means the server has read the ten frames sent before the ping.
	if err := c.conn.WriteControl(websocket.PingMessage, nil, time.Now().Add(guard)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-pong:
	case <-time.After(guard):
		t.Fatal("no pong")
	}
	p.release()
	if r := next(t, replies); r.Type != "observation" {
		t.Fatalf("the long step: %s %s", r.Type, r.Data)
	}
	for i := range 10 {
		r := next(t, replies)
		if i < 4 {
			if r.Type != "observation" || !strings.Contains(string(r.Data), fmt.Sprintf("echo: r%d", i)) {
				t.Fatalf("queued frame %d: %s %s", i, r.Type, r.Data)
			}
			continue
		}
		if r.Type != "error" || !strings.Contains(string(r.Data), `"code":"QUEUE_FULL"`) {
			t.Fatalf("frame %d past the queue: %s %s", i, r.Type, r.Data)
		}
	}
	c.sendRaw(t, `{"type":"step","data":{"reply":"after"}}`)
	if r := next(t, replies); r.Type != "observation" || !strings.Contains(string(r.Data), "echo: after") {
		t.Fatalf("after the flood: %s %s", r.Type, r.Data)
	}
}
