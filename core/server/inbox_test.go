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
	case <-time.After(10 * time.Second):
		t.Fatal("no reply in 10 s")
		return reply{}
	}
}

// A ping sent while a long step runs, with frames queued behind the step,
// is answered at once (OpenEnv's Python client drops a connection after
// 20 s without a pong), and the queued frames are then answered in order.
func TestPingsAnsweredBehindQueuedFrames(t *testing.T) {
	ts := startServer(t, Options{})
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
	c.sendRaw(t, `{"type":"step","data":{"reply":"sleep:2000"}}`)
	for i := range 8 {
		c.sendRaw(t, fmt.Sprintf(`{"type":"step","data":{"reply":"r%d"}}`, i))
	}
	time.Sleep(200 * time.Millisecond) // the frames reach the server
	start := time.Now()
	if err := c.conn.WriteControl(websocket.PingMessage, []byte("p"), start.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	select {
	case at := <-pong:
		if d := at.Sub(start); d > time.Second {
			t.Fatalf("pong after %s", d)
		}
	case <-time.After(1500 * time.Millisecond):
		t.Fatal("no pong within 1.5 s while a step ran with 8 frames queued behind it")
	}
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
	ts := startServer(t, Options{MaxQueuedFrames: 4})
	c := ts.dial(t, "")
	c.observation(t, `{"type":"reset","data":{"task_id":"day/1"}}`)
	replies := readAll(c)
	c.sendRaw(t, `{"type":"step","data":{"reply":"sleep:1500"}}`)
	time.Sleep(100 * time.Millisecond) // the step is running, the queue empty
	for i := range 10 {
		c.sendRaw(t, fmt.Sprintf(`{"type":"step","data":{"reply":"r%d"}}`, i))
	}
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
