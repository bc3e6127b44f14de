package server

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentenv/agentenv/sdk/sdktest/wait"

	"github.com/gorilla/websocket"

	"github.com/agentenv/agentenv/core/episode"
)

func TestFullEpisode(t *testing.T) {
	p := newFakePlayer()
	ts := startServer(t, Options{Player: p, Token: testToken})
	c := ts.dial(t, testToken)

	o := c.observation(t, `{"type":"reset","data":{"split":"all","index":1}}`)
	if o.Done || o.Reward != nil || o.Observation.TaskID != "day/2" || o.Observation.EpisodeID == "" {
		t.Fatalf("reset: %+v", o)
	}
	if len(o.Observation.Messages) != 2 || o.Observation.Messages[1]["content"] != "Prices: 1 2 3" {
		t.Fatalf("reset messages: %+v", o.Observation.Messages)
	}
	if len(o.Observation.Tools) != 1 || o.Observation.Tools[0]["type"] != "function" {
		t.Fatalf("reset tools: %+v", o.Observation.Tools)
	}
	o = c.observation(t, `{"type":"step","data":{"reply":"<tool_call>{}</tool_call>"}}`)
	if o.Done || o.Observation.Turn != 1 || o.Observation.Messages[0]["role"] != "tool" {
		t.Fatalf("step: %+v", o)
	}
	st := c.call(t, `{"type":"state"}`)
	var state map[string]any
	json.Unmarshal(st.Data, &state)
	if st.Type != "state" || state["step_count"] != 1.0 || state["episode_id"] != o.Observation.EpisodeID || state["live"] != true {
		t.Fatalf("state: %s %s", st.Type, st.Data)
	}
	o = c.observation(t, `{"type":"step","data":{"reply":"done"}}`)
	if !o.Done || o.Reward == nil || *o.Reward != 1 || o.Observation.Metrics["score/grade"] != 1 {
		t.Fatalf("final step: %+v", o)
	}
	// The episode is torn down once done; the session stays for another.
	wait.Until(t, "teardown after done", func() bool { _, closed, _, _ := p.counts(); return closed == 1 })
	if e := c.error(t, `{"type":"step","data":{"reply":"x"}}`); e.Code != CodeNoEpisode || !strings.Contains(e.Message, "done") {
		t.Fatalf("step after done: %+v", e)
	}
	o = c.observation(t, `{"type":"reset","data":{"task_id":"quiz","episode_id":"mine"}}`)
	if o.Observation.EpisodeID != "mine" || o.Observation.TaskID != "quiz" {
		t.Fatalf("second reset: %+v", o)
	}
	c.sendRaw(t, `{"type":"close"}`)
	_, _, err := c.conn.ReadMessage()
	if !websocket.IsCloseError(err, websocket.CloseNormalClosure) {
		t.Fatalf("after close: %v, want close 1000", err)
	}
	wait.Until(t, "teardown after close", func() bool { _, _, live, _ := p.counts(); return live == 0 })
	if v, _ := metricValue(t, ts, testToken, `agentenv_episodes_total{outcome="done"}`); v != 1 {
		t.Fatalf("episodes done = %v", v)
	}
}

func TestMaxTurnsEndsEpisode(t *testing.T) {
	ts := startServer(t, Options{})
	c := ts.dial(t, "")
	c.observation(t, `{"type":"reset","data":{"task_id":"day/1","max_turns":2}}`)
	if o := c.observation(t, `{"type":"step","data":{"reply":"a"}}`); o.Done {
		t.Fatal("done after 1 of 2 turns")
	}
	if o := c.observation(t, `{"type":"step","data":{"reply":"b"}}`); !o.Done || o.Reward == nil {
		t.Fatalf("not done at max_turns: %+v", o)
	}
}

// Every malformed frame is answered with its code and the session keeps
// serving: a reset on the same connection works after each.
func TestMalformedFrames(t *testing.T) {
	p := newFakePlayer()
	ts := startServer(t, Options{Player: p, MaxMessageBytes: 1 << 10})
	c := ts.dial(t, "")
	big := `{"type":"step","data":{"reply":"` + strings.Repeat("x", 5000) + `"}}`
	cases := []struct {
		name, frame, code, inMsg string
		binary                   bool
	}{
		{name: "not json", frame: `{"type": reset`, code: CodeInvalidJSON, inMsg: "Invalid JSON"},
		{name: "json array", frame: `[1,2]`, code: CodeInvalidJSON},
		{name: "json null", frame: `null`, code: CodeInvalidJSON},
		{name: "two values", frame: `{"type":"state"} {"type":"state"}`, code: CodeInvalidJSON},
		{name: "binary frame", frame: `{"type":"state"}`, binary: true, code: CodeInvalidJSON, inMsg: "binary"},
		{name: "oversize", frame: big, code: CodeMessageTooLarge, inMsg: "over the limit of 1024 bytes"},
		{name: "unknown type", frame: `{"type":"jump"}`, code: CodeUnknownType, inMsg: "Unknown message type: jump"},
		{name: "mcp", frame: `{"type":"mcp","data":{}}`, code: CodeUnknownType},
		{name: "missing type", frame: `{"data":{}}`, code: CodeValidation, inMsg: "type: Field required"},
		{name: "extra top key", frame: `{"type":"state","bogus":1}`, code: CodeValidation, inMsg: "bogus"},
		{name: "step before reset", frame: `{"type":"step","data":{"reply":"hi"}}`, code: CodeNoEpisode, inMsg: "send reset first"},
		{name: "reset without task", frame: `{"type":"reset"}`, code: CodeValidation, inMsg: "task_id"},
		{name: "reset both", frame: `{"type":"reset","data":{"task_id":"quiz","index":0}}`, code: CodeValidation, inMsg: "not both"},
		{name: "reset bad index", frame: `{"type":"reset","data":{"split":"all","index":-1}}`, code: CodeValidation, inMsg: "index"},
		{name: "reset float index", frame: `{"type":"reset","data":{"split":"all","index":1.5}}`, code: CodeValidation, inMsg: "integer"},
		{name: "reset unknown key", frame: `{"type":"reset","data":{"task_id":"quiz","tmperature":1}}`, code: CodeValidation, inMsg: "tmperature"},
		{name: "reset data not object", frame: `{"type":"reset","data":"quiz"}`, code: CodeValidation},
		{name: "reset unknown task", frame: `{"type":"reset","data":{"task_id":"nope"}}`, code: CodeNotFound, inMsg: "nope"},
		{name: "reset index past end", frame: `{"type":"reset","data":{"split":"all","index":99}}`, code: CodeValidation, inMsg: "out of range"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			kind := websocket.TextMessage
			if tc.binary {
				kind = websocket.BinaryMessage
			}
			if err := c.conn.WriteMessage(kind, []byte(tc.frame)); err != nil {
				t.Fatal(err)
			}
			r := c.recv(t)
			var e errReply
			json.Unmarshal(r.Data, &e)
			if r.Type != "error" || e.Code != tc.code || !strings.Contains(e.Message, tc.inMsg) {
				t.Fatalf("got %s %s, want error %s containing %q", r.Type, r.Data, tc.code, tc.inMsg)
			}
			if tc.code == CodeValidation && !strings.HasPrefix(tc.name, "reset index past") && len(e.Errors) == 0 {
				t.Fatalf("VALIDATION_ERROR without errors list: %s", r.Data)
			}
		})
	}
	// The session still plays.
	o := c.observation(t, `{"type":"reset","data":{"task_id":"day/7"}}`)
	if o.Observation.TaskID != "day/7" {
		t.Fatalf("reset after errors: %+v", o)
	}
	for _, tc := range []struct{ frame, code string }{
		{`{"type":"step"}`, CodeValidation},
		{`{"type":"step","data":{"type":"call_tool","tool_name":"x","arguments":{}}}`, CodeValidation},
		{`{"type":"step","data":{"reply":7}}`, CodeValidation},
		{`{"type":"step","data":{"reply":"invalid"}}`, CodeValidation},
	} {
		if e := c.error(t, tc.frame); e.Code != tc.code {
			t.Fatalf("%s: got %+v, want %s", tc.frame, e, tc.code)
		}
	}
	// A validation failure from the episode keeps it open.
	if o := c.observation(t, `{"type":"step","data":{"reply":"done"}}`); !o.Done {
		t.Fatalf("episode did not survive a validation error: %+v", o)
	}
	if v, ok := metricValue(t, ts, "", `agentenv_errors_total{code="INVALID_JSON"}`); !ok || v != 5 {
		t.Fatalf("INVALID_JSON count = %v, want 5", v)
	}
}

func TestEpisodeFailures(t *testing.T) {
	t.Run("execution error ends the episode", func(t *testing.T) {
		p := newFakePlayer()
		ts := startServer(t, Options{Player: p})
		c := ts.dial(t, "")
		c.observation(t, `{"type":"reset","data":{"task_id":"quiz"}}`)
		if e := c.error(t, `{"type":"step","data":{"reply":"fail"}}`); e.Code != CodeExecution || !strings.Contains(e.Message, "env crashed") {
			t.Fatalf("got %+v", e)
		}
		wait.Until(t, "teardown after failure", func() bool { _, closed, _, _ := p.counts(); return closed == 1 })
		if e := c.error(t, `{"type":"step","data":{"reply":"x"}}`); e.Code != CodeNoEpisode {
			t.Fatalf("got %+v", e)
		}
	})
	t.Run("deploy failure", func(t *testing.T) {
		p := newFakePlayer()
		p.startErr = &episode.Error{Code: episode.CodeDeploy, Err: errors.New("env exited with status 1")}
		ts := startServer(t, Options{Player: p, MaxConcurrentEnvs: 1})
		c := ts.dial(t, "")
		// The slot is released each time, or the second would wait out
		// its wait_s and get CAPACITY_REACHED (the wait is long so a slow
		// teardown is no failure: it runs in the background).
		for range 3 {
			if e := c.error(t, `{"type":"reset","data":{"task_id":"quiz","wait_s":30}}`); e.Code != CodeDeploy {
				t.Fatalf("got %+v", e)
			}
		}
		// The error reply does not wait for the teardown.
		wait.Until(t, "the three failed episodes torn down", func() bool {
			_, closed, live, _ := p.counts()
			return closed == 3 && live == 0
		})
	})
	t.Run("unencodable metrics", func(t *testing.T) {
		p := newFakePlayer()
		ts := startServer(t, Options{Player: p})
		c := ts.dial(t, "")
		c.observation(t, `{"type":"reset","data":{"task_id":"quiz"}}`)
		if e := c.error(t, `{"type":"step","data":{"reply":"nan"}}`); e.Code != CodeExecution || !strings.Contains(e.Message, "score/grade") {
			t.Fatalf("got %+v", e)
		}
	})
}

func TestResetReplacesEpisode(t *testing.T) {
	p := newFakePlayer()
	ts := startServer(t, Options{Player: p, MaxConcurrentEnvs: 1})
	c := ts.dial(t, "")
	c.observation(t, `{"type":"reset","data":{"task_id":"quiz"}}`)
	// With one slot, a second reset only works if the first episode's slot
	// is given back.
	c.observation(t, `{"type":"reset","data":{"task_id":"day/1","wait_s":1}}`)
	if started, closed, live, _ := p.counts(); started != 2 || closed != 1 || live != 1 {
		t.Fatalf("started %d closed %d live %d", started, closed, live)
	}
}

func TestDisconnectTearsDown(t *testing.T) {
	p := newFakePlayer()
	ts := startServer(t, Options{Player: p})
	c := ts.dial(t, "")
	c.observation(t, `{"type":"reset","data":{"task_id":"quiz"}}`)
	c.sendRaw(t, `{"type":"step","data":{"reply":"hold"}}`)
	p.waitStep(t, "hold")
	c.conn.Close() // mid-step
	wait.Until(t, "teardown after disconnect", func() bool { _, _, live, _ := p.counts(); return live == 0 })
	wait.Until(t, "session gone", func() bool { return ts.sessionCount() == 0 })
	if v, _ := metricValue(t, ts, "", "agentenv_episodes_live"); v != 0 {
		t.Fatalf("live episodes metric %v after disconnect", v)
	}
}

// Pings keep a step longer than the pong deadline alive, and a peer that
// stops answering pings is dropped and its episode torn down. In a
// synctest bubble over in-memory connections: the 3 s step and the 2 s
// pong deadline take no wall time.
func TestKeepalive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newFakePlayer()
		ts := startPipeServer(t, Options{Player: p, PingInterval: 300 * time.Millisecond, PongTimeout: 2 * time.Second})
		c := ts.dial(t, "")
		c.observation(t, `{"type":"reset","data":{"task_id":"quiz"}}`)
		if o := c.observation(t, `{"type":"step","data":{"reply":"sleep:3000"}}`); o.Observation.Turn != 1 {
			t.Fatalf("long step: %+v", o)
		}
		c.conn.Close()
		wait.Until(t, "first session gone", func() bool { return ts.sessionCount() == 0 })

		dead := ts.dial(t, "")
		dead.observation(t, `{"type":"reset","data":{"task_id":"quiz"}}`)
		dead.conn.SetPingHandler(func(string) error { return nil }) // never pong
		go func() {
			for {
				if _, _, err := dead.conn.ReadMessage(); err != nil {
					return
				}
			}
		}()
		wait.Until(t, "dead peer dropped", func() bool { return ts.sessionCount() == 0 })
		if _, _, live, _ := p.counts(); live != 0 {
			t.Fatalf("%d episodes live after the dead peer was dropped", live)
		}
	})
}

// Activity keeps a session; idleness past IdleTimeout ends it. The span
// of time is the subject, so the server runs in a synctest bubble over
// in-memory connections: each step comes exactly 200 ms after the last,
// the close exactly 1.5 s after the last step, in no wall time.
func TestIdleTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newFakePlayer()
		ts := startPipeServer(t, Options{Player: p, IdleTimeout: 1500 * time.Millisecond})
		c := ts.dial(t, "")
		c.observation(t, `{"type":"reset","data":{"task_id":"quiz"}}`)
		// Steps every 200 ms for 2.4 s: longer than the timeout in all.
		for range 12 {
			time.Sleep(200 * time.Millisecond)
			c.observation(t, `{"type":"step","data":{"reply":"a"}}`)
		}
		last := time.Now()
		_, _, err := c.conn.ReadMessage()
		var ce *websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != websocket.CloseNormalClosure || ce.Text != "idle timeout" {
			t.Fatalf("got %v, want close 1000 idle timeout", err)
		}
		if d := time.Since(last); d != 1500*time.Millisecond {
			t.Errorf("closed %s after the last step, want the idle timeout, 1.5s", d)
		}
		synctest.Wait() // the teardown, in the background
		if _, _, live, _ := p.counts(); live != 0 {
			t.Fatalf("%d episodes live after the idle close", live)
		}
		if v, _ := ts.metric(t, "agentenv_sessions_expired_total"); v != 1 {
			t.Fatalf("expired = %v", v)
		}
	})
}

func TestCapacityQueue(t *testing.T) {
	p := newFakePlayer()
	ts := startServer(t, Options{Player: p, MaxConcurrentEnvs: 1})
	a := ts.dial(t, "")
	a.observation(t, `{"type":"reset","data":{"task_id":"quiz"}}`)

	// A reset with a short wait gives up with CAPACITY_REACHED and the
	// session stays usable.
	b := ts.dial(t, "")
	e := b.error(t, `{"type":"reset","data":{"task_id":"quiz","wait_s":0.1}}`)
	if e.Code != CodeCapacity || !strings.Contains(e.Message, "1/1") {
		t.Fatalf("got %+v", e)
	}
	// A patient reset waits in the queue, visible in /metrics, and gets
	// the slot when the first episode ends.
	b.sendRaw(t, `{"type":"reset","data":{"task_id":"day/3"}}`)
	wait.Until(t, "queue depth 1", func() bool {
		v, _ := metricValue(t, ts, "", "agentenv_reset_queue_depth")
		return v == 1
	})
	a.observation(t, `{"type":"step","data":{"reply":"done"}}`)
	r := b.recv(t)
	if r.Type != "observation" {
		t.Fatalf("queued reset got %s %s", r.Type, r.Data)
	}
	if _, _, _, maxLive := p.counts(); maxLive != 1 {
		t.Fatalf("max live %d with capacity 1", maxLive)
	}
}

func TestConcurrentEpisodesQueue(t *testing.T) {
	p := newFakePlayer()
	p.startDelay = 20 * time.Millisecond
	ts := startServer(t, Options{Player: p, MaxConcurrentEnvs: 16})
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	maxQueue := 0.0
	stop, polled := make(chan struct{}), make(chan struct{})
	go func() { // sample the queue depth as a scraper would
		defer close(polled)
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			if v, err := scrape(ts, "agentenv_reset_queue_depth"); err == nil && v > maxQueue {
				maxQueue = v
			}
		}
	}()
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, _, err := ts.tryDial("")
			if err != nil {
				errs <- err
				return
			}
			defer c.conn.Close()
			for _, msg := range []string{
				`{"type":"reset","data":{"split":"all","index":` + string(rune('0'+i%3)) + `}}`,
				`{"type":"step","data":{"reply":"sleep:30"}}`,
				`{"type":"step","data":{"reply":"done"}}`,
			} {
				c.conn.WriteMessage(websocket.TextMessage, []byte(msg))
				_, b, err := c.conn.ReadMessage()
				if err != nil {
					errs <- err
					return
				}
				if !strings.HasPrefix(string(b), `{"type":"observation"`) {
					errs <- errors.New(string(b))
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-polled
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// A session tears its episode down after its last reply is sent.
	wait.Until(t, "the 64 teardowns", func() bool { _, closed, _, _ := p.counts(); return closed == 64 })
	started, closed, live, maxLive := p.counts()
	if started != 64 || closed != 64 || live != 0 || maxLive > 16 {
		t.Fatalf("started %d closed %d live %d max live %d", started, closed, live, maxLive)
	}
	if maxQueue == 0 {
		t.Fatal("queue depth never showed in /metrics")
	}
}

func TestShutdownTellsSessions(t *testing.T) {
	p := newFakePlayer()
	s, err := New(Options{Player: p, Catalog: fakeCatalog{}, MaxConcurrentEnvs: 2})
	if err != nil {
		t.Fatal(err)
	}
	ts := serveOn(t, s)
	idle := ts.dial(t, "")
	idle.observation(t, `{"type":"reset","data":{"task_id":"quiz"}}`)
	busy := ts.dial(t, "")
	busy.observation(t, `{"type":"reset","data":{"task_id":"quiz"}}`)
	busy.sendRaw(t, `{"type":"step","data":{"reply":"hold"}}`)
	p.waitStep(t, "hold")
	queued := ts.dial(t, "")
	queued.sendRaw(t, `{"type":"reset","data":{"task_id":"quiz"}}`)
	wait.Until(t, "the third reset queued", func() bool {
		v, _ := metricValue(t, ts, "", "agentenv_reset_queue_depth")
		return v == 1
	})

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 8*time.Second {
		t.Fatalf("shutdown took %s", d)
	}
	for name, c := range map[string]*wsClient{"idle": idle, "busy": busy, "queued": queued} {
		r := c.recv(t)
		var e errReply
		json.Unmarshal(r.Data, &e)
		if r.Type != "error" || e.Code != CodeShuttingDown {
			t.Errorf("%s: got %s %s, want SHUTTING_DOWN", name, r.Type, r.Data)
		}
		if _, _, err := c.conn.ReadMessage(); !websocket.IsCloseError(err, websocket.CloseGoingAway) {
			t.Errorf("%s: got %v, want close 1001", name, err)
		}
	}
	if _, _, live, _ := p.counts(); live != 0 {
		t.Fatalf("%d episodes live after shutdown", live)
	}
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/health", nil))
	if rec.Code != 503 || !strings.Contains(rec.Body.String(), `"draining"`) {
		t.Fatalf("health after shutdown: %d %s", rec.Code, rec.Body)
	}
}

// serveOn serves s on a loopback port; the test shuts it down itself.
func serveOn(t *testing.T, s *Server) *testServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln)
	t.Cleanup(func() { s.Shutdown(context.Background()) })
	return &testServer{Server: s, addr: ln.Addr().String()}
}

// While the drain runs, the listener stays up: /health says draining and
// new sessions are refused with SHUTTING_DOWN.
func TestHealthDrainingDuringShutdown(t *testing.T) {
	p := newFakePlayer()
	p.closeDelay = 1500 * time.Millisecond
	s, err := New(Options{Player: p, Catalog: fakeCatalog{}})
	if err != nil {
		t.Fatal(err)
	}
	ts := serveOn(t, s)
	c := ts.dial(t, "")
	c.observation(t, `{"type":"reset","data":{"task_id":"quiz"}}`)
	done := make(chan error, 1)
	go func() { done <- s.Shutdown(context.Background()) }()
	wait.Until(t, "draining", func() bool { return s.Draining() })
	code, body := get(t, ts.url("/health"), "")
	if code != 503 || !strings.Contains(body, `"draining"`) {
		t.Fatalf("health while draining: %d %s", code, body)
	}
	// The liveness probe's path stays 200 while the drain runs: the pod
	// must not be killed mid-teardown.
	if code, body := get(t, ts.url("/livez"), ""); code != 200 || !strings.Contains(body, `"alive"`) {
		t.Fatalf("/livez while draining: %d %s", code, body)
	}
	_, resp, err := ts.tryDial("")
	if err == nil || resp == nil || resp.StatusCode != 503 {
		t.Fatalf("new session while draining: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, _, live, _ := p.counts(); live != 0 {
		t.Fatalf("%d episodes live after the drain", live)
	}
}
