package envclient_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentenv/agentenv/core/envclient"
)

// recorder is a proxy in front of an env that notes each request as
// "POST <json-rpc method>" or "DELETE <session id>", and can rewrite the
// protocol version initialize proposes.
type recorder struct {
	mu       sync.Mutex
	requests []string
	sessions []string // the session ids initialize answers gave
	propose  string   // when set, initialize proposes this version
}

func (r *recorder) start(t *testing.T, env string) string {
	t.Helper()
	target, err := url.Parse(env)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ModifyResponse = func(resp *http.Response) error {
		if sid := resp.Header.Get("Mcp-Session-Id"); sid != "" && resp.Request.Header.Get("Mcp-Session-Id") == "" {
			r.mu.Lock()
			r.sessions = append(r.sessions, sid)
			r.mu.Unlock()
		}
		return nil
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		note := req.Method + " " + req.Header.Get("Mcp-Session-Id")
		if req.Method == http.MethodPost {
			body, _ := io.ReadAll(req.Body)
			var m map[string]any
			_ = json.Unmarshal(body, &m)
			note = "POST " + m["method"].(string)
			if m["method"] == "initialize" && r.propose != "" {
				m["params"].(map[string]any)["protocolVersion"] = r.propose
				body, _ = json.Marshal(m)
				req.ContentLength = int64(len(body))
			}
			req.Body = io.NopCloser(bytes.NewReader(body))
		}
		r.mu.Lock()
		r.requests = append(r.requests, note)
		r.mu.Unlock()
		proxy.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// connect connects to the env behind the recorder once it answers, and
// returns a client connected afresh with the count of requests noted
// before it.
func (r *recorder) connect(ctx context.Context, t *testing.T, url string) (*envclient.Client, int) {
	t.Helper()
	warm, err := envclient.Connect(ctx, url, envclient.Options{}) // waits for the env
	if err != nil {
		t.Fatal(err)
	}
	warm.Close()
	from := r.count()
	c, err := envclient.Connect(ctx, url, envclient.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return c, from
}

// since returns the requests noted from i on.
func (r *recorder) since(i int) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.requests[i:]...)
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.requests)
}

// A lean session is the connect's two requests, the calls, and at Close
// the DELETE of the session initialize opened.
func TestLeanConnectEndsItsSession(t *testing.T) {
	rec := &recorder{}
	url := rec.start(t, startEnv(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, from := rec.connect(ctx, t, url)
	if !c.Lean() {
		t.Fatal("a 2025-11-25 session is not lean")
	}
	if err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	if res, err := c.CallTool(ctx, "echo", json.RawMessage(`{"text":"x"}`), 5*time.Second); err != nil || res.Text != "x" {
		t.Fatalf("echo: %+v, %v", res, err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	sid := rec.sessions[len(rec.sessions)-1]
	rec.mu.Unlock()
	want := []string{"POST initialize", "POST notifications/initialized", "POST ping", "POST tools/call", "DELETE " + sid}
	if got := rec.since(from); strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Fatalf("requests %v, want %v", got, want)
	}
}

// An env that answers initialize with a version the lean client does not
// speak gets the SDK's session instead: the lean one is deleted, the SDK
// connects and makes the calls.
func TestLeanConnectLeavesOtherVersionsToTheSDK(t *testing.T) {
	rec := &recorder{propose: "2024-11-05"}
	url := rec.start(t, startEnv(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, from := rec.connect(ctx, t, url)
	defer c.Close()
	if c.Lean() {
		t.Fatal("a 2024-11-05 session is lean")
	}
	if res, err := c.CallTool(ctx, "echo", json.RawMessage(`{"text":"y"}`), 5*time.Second); err != nil || res.Text != "y" {
		t.Fatalf("echo: %+v, %v", res, err)
	}
	rec.mu.Lock()
	first := rec.sessions[len(rec.sessions)-2]
	rec.mu.Unlock()
	want := []string{"POST initialize", "DELETE " + first, "POST initialize", "POST notifications/initialized", "POST tools/call"}
	if got := rec.since(from); strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Fatalf("requests %v, want %v", got, want)
	}
}

// A listing the lean client leaves to the SDK (a schema with x-mcp-header)
// is the SDK's listing, on a session of its own, on a lean client whose
// calls stay lean; Close ends both sessions.
func TestLeanListLeavesHeaderSchemasToTheSDK(t *testing.T) {
	for _, mode := range []string{"sse", "json"} {
		t.Run(mode, func(t *testing.T) {
			env := []string{"TESTENV_HEADER_TOOL=1"}
			if mode == "json" {
				env = append(env, "TESTENV_JSON_RESPONSE=1")
			}
			rec := &recorder{}
			url := rec.start(t, startEnv(t, env...))
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			c, err := envclient.Connect(ctx, url, envclient.Options{})
			if err != nil {
				t.Fatal(err)
			}
			sdk, err := envclient.ConnectSDK(ctx, url, envclient.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer sdk.Close()
			got, gerr := c.ListTools(ctx)
			want, werr := sdk.ListTools(ctx)
			if gerr != nil || werr != nil {
				t.Fatalf("lean %v, SDK %v", gerr, werr)
			}
			if len(got) != len(want) {
				t.Fatalf("lean listed %d tools, the SDK %d", len(got), len(want))
			}
			region := false
			for i := range want {
				region = region || want[i].Name == "region"
				if got[i].Name != want[i].Name || got[i].Description != want[i].Description || string(got[i].Parameters) != string(want[i].Parameters) {
					t.Errorf("tool %d: lean %+v\nSDK %+v", i, got[i], want[i])
				}
			}
			if !region {
				t.Errorf("the SDK's listing has no region tool: %+v", want)
			}
			if !c.Lean() {
				t.Fatal("the client's calls are no longer lean")
			}
			if res, err := c.CallTool(ctx, "echo", json.RawMessage(`{"text":"z"}`), 5*time.Second); err != nil || res.Text != "z" {
				t.Fatalf("echo: %+v, %v", res, err)
			}
			from := rec.count()
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			if got := rec.since(from); len(got) != 2 || !strings.HasPrefix(got[0], "DELETE ") || !strings.HasPrefix(got[1], "DELETE ") || got[0] == got[1] {
				t.Errorf("Close sent %v, want the DELETEs of two sessions", got)
			}
		})
	}
}

// Drop, for an env about to be torn down, sends nothing: no DELETE, then
// or at a Close after it.
func TestDropSendsNothing(t *testing.T) {
	rec := &recorder{}
	url := rec.start(t, startEnv(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := envclient.Connect(ctx, url, envclient.Options{})
	if err != nil {
		t.Fatal(err)
	}
	from := rec.count()
	c.Drop()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if got := rec.since(from); len(got) != 0 {
		t.Fatalf("Drop and Close sent %v", got)
	}
}
