package server

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

const testToken = "s3cret-token"

// testServer runs a Server on a loopback port until the test ends.
type testServer struct {
	*Server
	addr   string
	dialer *websocket.Dialer // nil: websocket.DefaultDialer
}

func startServer(t testing.TB, opts Options) *testServer {
	t.Helper()
	s := newTestServer(t, opts)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return &testServer{Server: s, addr: ln.Addr().String()}
}

// newTestServer is New with the tests' defaults (a fake player and
// catalogue, GridSim's info) for what opts leaves out.
func newTestServer(t testing.TB, opts Options) *Server {
	t.Helper()
	if opts.Player == nil {
		opts.Player = newFakePlayer()
	}
	if opts.Catalog == nil {
		opts.Catalog = fakeCatalog{}
	}
	if opts.Info.Name == "" {
		opts.Info = Info{Name: "gridsim", Description: "Battery days.", Readme: "# gridsim\n\nBattery days.\n", Version: "0.1.0-test"}
	}
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (ts *testServer) url(path string) string { return "http://" + ts.addr + path }

// dial opens a WebSocket session, with the token when token != "".
func (ts *testServer) dial(t *testing.T, token string) *wsClient {
	t.Helper()
	c, resp, err := ts.tryDial(token)
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		t.Fatalf("dial: %v (status %d)", err, status)
	}
	t.Cleanup(func() { c.conn.Close() })
	return c
}

func (ts *testServer) tryDial(token string) (*wsClient, *http.Response, error) {
	h := http.Header{}
	if token != "" {
		h.Set("Authorization", "Bearer "+token)
	}
	d := ts.dialer
	if d == nil {
		d = websocket.DefaultDialer
	}
	conn, resp, err := d.Dial("ws://"+ts.addr+"/ws", h)
	if err != nil {
		return nil, resp, err
	}
	return &wsClient{conn: conn}, resp, nil
}

type wsClient struct{ conn *websocket.Conn }

// reply is a decoded server frame.
type reply struct {
	Type string          `json:"type"`
	Data json.RawMessage `json:"data"`
}

type obsReply struct {
	Observation struct {
		EpisodeID string             `json:"episode_id"`
		TaskID    string             `json:"task_id"`
		Messages  []map[string]any   `json:"messages"`
		Tools     []map[string]any   `json:"tools"`
		Turn      int                `json:"turn"`
		Metrics   map[string]float64 `json:"metrics"`
	} `json:"observation"`
	Reward *float64 `json:"reward"`
	Done   bool     `json:"done"`
}

type errReply struct {
	Code    string       `json:"code"`
	Message string       `json:"message"`
	Errors  []FieldError `json:"errors"`
}

func (c *wsClient) sendRaw(t *testing.T, s string) {
	t.Helper()
	if err := c.conn.WriteMessage(websocket.TextMessage, []byte(s)); err != nil {
		t.Fatalf("send: %v", err)
	}
}

func (c *wsClient) recv(t *testing.T) reply {
	t.Helper()
	c.conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	_, b, err := c.conn.ReadMessage()
	if err != nil {
		t.Fatalf("recv: %v", err)
	}
	var r reply
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("recv: not JSON: %q", b)
	}
	return r
}

// call sends s and returns the reply.
func (c *wsClient) call(t *testing.T, s string) reply {
	t.Helper()
	c.sendRaw(t, s)
	return c.recv(t)
}

func (c *wsClient) observation(t *testing.T, s string) obsReply {
	t.Helper()
	r := c.call(t, s)
	if r.Type != "observation" {
		t.Fatalf("%s: got %s %s, want an observation", s, r.Type, r.Data)
	}
	var o obsReply
	if err := json.Unmarshal(r.Data, &o); err != nil {
		t.Fatal(err)
	}
	return o
}

func (c *wsClient) error(t *testing.T, s string) errReply {
	t.Helper()
	r := c.call(t, s)
	if r.Type != "error" {
		t.Fatalf("%.80s: got %s %s, want an error", s, r.Type, r.Data)
	}
	var e errReply
	if err := json.Unmarshal(r.Data, &e); err != nil {
		t.Fatal(err)
	}
	return e
}

// get does an HTTP GET with the token (if any) and returns status and body.
func get(t *testing.T, url, token string) (int, string) {
	t.Helper()
	return do(t, http.MethodGet, url, token, "")
}

func do(t *testing.T, method, url, token, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// metricValue reads one sample from /metrics text, e.g.
// `agentenv_reset_queue_depth` or `agentenv_errors_total{code="INVALID_JSON"}`.
func metricValue(t *testing.T, ts *testServer, token, series string) (float64, bool) {
	t.Helper()
	_, body := get(t, ts.url("/metrics"), token)
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, series+" ") {
			var v float64
			if err := json.Unmarshal([]byte(strings.TrimSpace(strings.TrimPrefix(line, series))), &v); err != nil {
				t.Fatalf("metric %s: %v", line, err)
			}
			return v, true
		}
	}
	return 0, false
}

// scrape reads one unlabelled sample from /metrics without failing the
// test, for use from helper goroutines.
func scrape(ts *testServer, series string) (float64, error) {
	resp, err := http.Get(ts.url("/metrics"))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			var f float64
			err := json.Unmarshal([]byte(v), &f)
			return f, err
		}
	}
	return 0, io.EOF
}

// guard bounds a wait on an event; only a broken test reaches it.
const guard = 60 * time.Second
