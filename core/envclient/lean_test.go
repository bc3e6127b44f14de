package envclient_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
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

// The lean tools/call answers as the SDK's does, call for call, on the
// SDK's own server (testenv) answering in SSE streams and in JSON bodies:
// the same text, tool error flag and cut bytes, and an error where the
// SDK's call errs (an unknown tool, a deadline, a crashed env).
func TestLeanCallConformance(t *testing.T) {
	cases := []struct {
		name    string
		tool    string
		args    string
		limit   int64
		timeout time.Duration
	}{
		{"text", "echo", `{"text": "hi"}`, 0, 0},
		{"escapes and unicode", "echo", `{"text": "a\"b\\c\n\u2028 é \ud83d\ude00 <&>"}`, 0, 0},
		{"empty text", "echo", `{"text": ""}`, 0, 0},
		{"tool error", "add", `{"n": 1}`, 0, 0},
		{"setup", "load_puzzle", `{"target": 5, "start": 2}`, 0, 0},
		{"after setup", "add", `{"n": 0}`, 0, 0},
		{"arguments the schema refuses", "add", `{"n": "one"}`, 0, 0},
		{"arguments as written", "echo_args", `{"n": 1.50, "k": [1, {"z": null}], "s": "\u00e9 <&> \/ \u0000", "big": 123456789012345678901234567890}`, 0, 0},
		{"several parts", "flood", `{"bytes": 10, "parts": 3, "char": "ab"}`, 0, 0},
		{"cut", "flood", `{"bytes": 100000, "parts": 2}`, 1000, 0},
		{"unknown tool", "nope", `{}`, 0, 0},
		{"deadline", "sleep", `{"seconds": 2}`, 0, 300 * time.Millisecond},
	}
	for _, mode := range []struct {
		name string
		env  []string
	}{{"sse", nil}, {"json", []string{"TESTENV_JSON_RESPONSE=1"}}} {
		t.Run(mode.name, func(t *testing.T) {
			url := startEnv(t, append([]string{"TESTENV_ECHO_ARGS=1"}, mode.env...)...)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			lean, err := envclient.Connect(ctx, url, envclient.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer lean.Close()
			sdk, err := envclient.ConnectSDK(ctx, url, envclient.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer sdk.Close()
			if !lean.Lean() || sdk.Lean() {
				t.Fatalf("lean path: %v on the lean client, %v on the SDK's; want true, false", lean.Lean(), sdk.Lean())
			}
			for _, c := range cases {
				var want, got envclient.Result
				var wantErr, gotErr error
				for _, cl := range []struct {
					c   *envclient.Client
					res *envclient.Result
					err *error
				}{{sdk, &want, &wantErr}, {lean, &got, &gotErr}} {
					*cl.res, *cl.err = cl.c.CallRawLimited(ctx, c.tool, json.RawMessage(c.args), c.timeout, c.limit)
				}
				if (wantErr == nil) != (gotErr == nil) || errors.Is(wantErr, envclient.ErrTimeout) != errors.Is(gotErr, envclient.ErrTimeout) {
					t.Errorf("%s: SDK error %v, lean error %v", c.name, wantErr, gotErr)
					continue
				}
				if !sameResult(got, want) {
					t.Errorf("%s: lean %+v (%d bytes), SDK %+v (%d bytes)", c.name, clipResult(got), len(got.Text), clipResult(want), len(want.Text))
				}
			}
			// An env gone mid-session: both err.
			if _, err := lean.CallTool(ctx, "crash", nil, 5*time.Second); err == nil {
				t.Error("crash: the lean call answered")
			}
			if _, err := lean.CallTool(ctx, "echo", json.RawMessage(`{"text": "x"}`), 5*time.Second); err == nil {
				t.Error("a call to a crashed env answered on the lean path")
			}
			if _, err := sdk.CallTool(ctx, "echo", json.RawMessage(`{"text": "x"}`), 5*time.Second); err == nil {
				t.Error("a call to a crashed env answered on the SDK's path")
			}
		})
	}
}

// sameResult: equal, or, for an answer cut to its limit, equal but for
// where the cut fell: the cutter's room counts the answer's other bytes,
// among them the request id, which the lean call spells as a string (so
// it never meets the SDK's numeric ids on the session).
func sameResult(got, want envclient.Result) bool {
	if want.Cut == 0 || got.Cut == 0 {
		return got == want
	}
	d := len(got.Text) - len(want.Text)
	return got.IsError == want.IsError && int64(len(got.Text))+got.Cut == int64(len(want.Text))+want.Cut &&
		d <= 16 && d >= -16 && strings.Count(got.Text, "\n") == strings.Count(want.Text, "\n")
}

func clipResult(r envclient.Result) envclient.Result {
	if len(r.Text) > 200 {
		r.Text = r.Text[:200] + "..."
	}
	return r
}

// A deploy's MCP traffic is what the engine needs and no more: initialize
// (no server/discover probe before it), tools/list, then each call one
// POST of tools/call on the session.
func TestConnectAndCallRoundTrips(t *testing.T) {
	target, err := url.Parse(startEnv(t))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var methods []string
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			var m struct {
				Method string `json:"method"`
			}
			_ = json.Unmarshal(body, &m)
			mu.Lock()
			methods = append(methods, m.Method)
			mu.Unlock()
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		proxy.ServeHTTP(w, r)
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Once the env answers (Connect retries until it does), count afresh.
	first, err := envclient.Connect(ctx, srv.URL, envclient.Options{})
	if err != nil {
		t.Fatal(err)
	}
	first.Close()
	mu.Lock()
	methods = nil
	mu.Unlock()
	c, err := envclient.Connect(ctx, srv.URL, envclient.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.ListTools(ctx); err != nil {
		t.Fatal(err)
	}
	if res, err := c.CallTool(ctx, "echo", json.RawMessage(`{"text": "x"}`), 5*time.Second); err != nil || res.Text != "x" {
		t.Fatalf("echo: %+v, %v", res, err)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"initialize", "notifications/initialized", "tools/list", "tools/call"}
	if strings.Join(methods, " ") != strings.Join(want, " ") {
		t.Fatalf("requests %v, want %v", methods, want)
	}
}

// The lean tools/list gives what the SDK's listing gives: every tool, in
// order, across pages, with the same names, descriptions and schema text.
func TestLeanListConformance(t *testing.T) {
	for _, env := range [][]string{{"TESTENV_ECHO_ARGS=1"}, {"TESTENV_PAGE_SIZE=2", "TESTENV_PREFIX=p_"}, {"TESTENV_JSON_RESPONSE=1", "TESTENV_PAGE_SIZE=3"}} {
		url := startEnv(t, env...)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		lean, err := envclient.Connect(ctx, url, envclient.Options{})
		if err != nil {
			t.Fatal(err)
		}
		sdk, err := envclient.ConnectSDK(ctx, url, envclient.Options{})
		if err != nil {
			t.Fatal(err)
		}
		got, gerr := lean.ListTools(ctx)
		want, werr := sdk.ListTools(ctx)
		lean.Close()
		sdk.Close()
		cancel()
		if gerr != nil || werr != nil {
			t.Fatalf("%v: lean %v, SDK %v", env, gerr, werr)
		}
		if len(got) != len(want) || len(want) < 5 {
			t.Fatalf("%v: lean listed %d tools, the SDK %d", env, len(got), len(want))
		}
		for i := range want {
			if got[i].Name != want[i].Name || got[i].Description != want[i].Description || string(got[i].Parameters) != string(want[i].Parameters) {
				t.Errorf("%v: tool %d: lean %+v\nSDK %+v", env, i, got[i], want[i])
			}
		}
	}
}
