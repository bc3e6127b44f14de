package server

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/agentenv/agentenv/sdk/sdktest/wait"

	"github.com/gorilla/websocket"
)

// endpoints lists every route with a request that succeeds with the token.
var endpoints = []struct{ method, path, body string }{
	{"GET", "/metadata", ""},
	{"GET", "/schema", ""},
	{"GET", "/openapi.json", ""},
	{"POST", "/mcp", "{}"},
	{"GET", "/metrics", ""},
	{"GET", "/splits", ""},
	{"GET", "/splits/all/tasks", ""},
	{"GET", "/tasks/day/1", ""},
	{"GET", "/toolsets/ts1/tools", ""},
	{"GET", "/list_environments", ""},
	{"GET", "/gridsim/splits", ""},
	{"POST", "/gridsim/tasks", `{"split":"all"}`},
	{"POST", "/gridsim/num_tasks", `{"split":"all"}`},
	{"POST", "/gridsim/task", `{"split":"all","index":0}`},
	{"POST", "/gridsim/task_range", `{"split":"all","start":0,"stop":2}`},
	{"GET", "/nowhere", ""}, // 404 with the token, 401 without
}

func TestTokenRequiredEverywhereButHealth(t *testing.T) {
	ts := startServer(t, Options{Token: testToken})
	basic := func(user, pass string) string {
		return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
	}
	bad := []struct{ name, header string }{
		{"missing", ""},
		{"wrong bearer", "Bearer not-the-token"},
		{"prefix of token", "Bearer s3cret"},
		{"token plus junk", "Bearer " + testToken + "x"},
		{"no scheme", testToken},
		{"wrong scheme", "Token " + testToken},
		{"basic wrong password", basic("u", "nope")},
		{"basic token as user", basic(testToken, "")},
	}
	for _, ep := range endpoints {
		for _, b := range bad {
			req, _ := http.NewRequest(ep.method, ts.url(ep.path), strings.NewReader(ep.body))
			if b.header != "" {
				req.Header.Set("Authorization", b.header)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var body map[string]string
			json.NewDecoder(resp.Body).Decode(&body)
			resp.Body.Close()
			if resp.StatusCode != 401 || body["code"] != CodeUnauthorized {
				t.Errorf("%s %s with %s: %d %v, want 401", ep.method, ep.path, b.name, resp.StatusCode, body)
			}
			if strings.Contains(body["detail"], testToken) || strings.Contains(body["detail"], "not-the-token") {
				t.Errorf("401 body echoes a credential: %v", body)
			}
		}
		want := 200
		if ep.path == "/nowhere" {
			want = 404
		}
		for _, h := range []string{"Bearer " + testToken, "bearer  " + testToken, basic("openenv", testToken)} {
			req, _ := http.NewRequest(ep.method, ts.url(ep.path), strings.NewReader(ep.body))
			req.Header.Set("Authorization", h)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != want {
				t.Errorf("%s %s with a good token (%.6s...): %d, want %d", ep.method, ep.path, h, resp.StatusCode, want)
			}
		}
	}
	if code, body := get(t, ts.url("/health"), ""); code != 200 || !strings.Contains(body, `"healthy"`) {
		t.Fatalf("health without token: %d %s", code, body)
	}
	for _, b := range bad {
		h := http.Header{}
		if b.header != "" {
			h.Set("Authorization", b.header)
		}
		_, resp, err := websocket.DefaultDialer.Dial("ws://"+ts.addr+"/ws", h)
		if err == nil || resp == nil || resp.StatusCode != 401 {
			t.Errorf("upgrade with %s: err %v, want 401", b.name, err)
		}
	}
	// The stock OpenEnv client sends URL userinfo as Basic auth.
	h := http.Header{"Authorization": {basic("openenv", testToken)}}
	conn, _, err := websocket.DefaultDialer.Dial("ws://"+ts.addr+"/ws", h)
	if err != nil {
		t.Fatalf("upgrade with basic auth: %v", err)
	}
	conn.Close()
	ts.dial(t, testToken).observation(t, `{"type":"reset","data":{"task_id":"quiz"}}`)
}

func TestOpenEnvIntrospection(t *testing.T) {
	ts := startServer(t, Options{})
	_, body := get(t, ts.url("/metadata"), "")
	var meta map[string]any
	json.Unmarshal([]byte(body), &meta)
	if meta["name"] != "gridsim" || meta["description"] != "Battery days." || meta["version"] != "0.1.0-test" ||
		!strings.Contains(meta["readme_content"].(string), "# gridsim") {
		t.Fatalf("metadata: %s", body)
	}
	for _, k := range []string{"author", "documentation_url"} {
		if v, ok := meta[k]; !ok || v != nil {
			t.Fatalf("metadata %s: %v", k, v)
		}
	}
	_, body = get(t, ts.url("/schema"), "")
	var schema map[string]map[string]any
	if err := json.Unmarshal([]byte(body), &schema); err != nil {
		t.Fatalf("schema: %v: %s", err, body)
	}
	for _, k := range []string{"action", "observation", "state"} {
		if schema[k]["type"] != "object" {
			t.Fatalf("schema %s: %v", k, schema[k])
		}
	}
	_, body = get(t, ts.url("/openapi.json"), "")
	var api struct {
		Info  struct{ Version string }
		Paths map[string]any
	}
	json.Unmarshal([]byte(body), &api)
	if api.Info.Version != "1.0.0" || api.Paths["/ws"] == nil || api.Paths["/reset"] != nil {
		t.Fatalf("openapi: %s", body)
	}
	for _, tc := range []struct{ body, want string }{
		{`{}`, `"code":-32600`},
		{`not json`, `"code":-32700`},
		{`{"jsonrpc":"2.0","id":7,"method":"tools/list"}`, `"id":7`},
		{`{"jsonrpc":"2.0","id":"a","method":"tools/list"}`, `"code":-32601`},
	} {
		code, body := do(t, "POST", ts.url("/mcp"), "", tc.body)
		if code != 200 || !strings.Contains(body, `"jsonrpc":"2.0"`) || !strings.Contains(body, tc.want) || !strings.Contains(body, `"data":null`) {
			t.Errorf("POST /mcp %s: %d %s", tc.body, code, body)
		}
	}
}

func TestCatalog(t *testing.T) {
	ts := startServer(t, Options{})
	cases := []struct {
		method, path, body string
		status             int
		want               []string
	}{
		{"GET", "/splits", "", 200, []string{`{"splits":[{"name":"all","size":3},{"name":"train","size":2}]}`}},
		{"GET", "/splits/all/tasks", "", 200, []string{`"size":3`, `"start":0`, `"stop":3`, `{"index":2,"task_id":"quiz","toolset":"ts2"}`}},
		{"GET", "/splits/all/tasks?start=1&stop=2", "", 200, []string{`"tasks":[{"index":1,"task_id":"day/2","toolset":"ts1"}]`}},
		{"GET", "/splits/all/tasks?start=5", "", 200, []string{`"tasks":[]`, `"start":3`}},
		{"GET", "/splits/all/tasks?start=-1", "", 400, []string{`"code":"VALIDATION_ERROR"`, `start`}},
		{"GET", "/splits/all/tasks?stop=x", "", 400, []string{`stop`}},
		{"GET", "/splits/all/tasks?start=2&stop=1", "", 400, []string{`"code":"VALIDATION_ERROR"`, `start 2 is past stop 1`}},
		{"POST", "/gridsim/task_range", `{"split": "all", "start": 2, "stop": 1}`, 400, []string{`"code":"VALIDATION_ERROR"`, `start 2 is past stop 1`}},
		{"GET", "/splits/nope/tasks", "", 404, []string{`"code":"NOT_FOUND"`, `nope`}},
		{"GET", "/tasks/day/1", "", 200, []string{`"task_id":"day/1"`, `"toolset":"ts1"`, `"prompt":[{"role":"user"`, `"steps":[{"id":"env","type":"deploy_env"}`}},
		{"GET", "/tasks/zzz", "", 404, []string{`zzz`}},
		{"GET", "/toolsets/ts1/tools", "", 200, []string{`"toolset":"ts1"`, `"tools":[{"type":"function","function":{"name":"submit"`}},
		{"GET", "/toolsets/ts9/tools", "", 404, []string{`ts9`}},
		{"GET", "/list_environments", "", 200, []string{`["gridsim"]`}},
		{"GET", "/gridsim/splits", "", 200, []string{`{"name":"all","type":"validation"}`, `{"name":"train","type":"train"}`}},
		{"POST", "/gridsim/tasks", `{"split":"train"}`, 200, []string{`"env_name":"gridsim"`, `"task_id":"day/2"`, `"split":"train"`}},
		{"POST", "/gridsim/num_tasks", `{"split":"all"}`, 200, []string{`{"num_tasks":3}`}},
		{"POST", "/gridsim/task", `{"split":"all","index":2}`, 200, []string{`{"task":{"index":2,"split":"all","task_id":"quiz","toolset":"ts2"}}`}},
		{"POST", "/gridsim/task", `{"split":"all","index":3}`, 400, []string{`Invalid task index`}},
		{"POST", "/gridsim/task_range", `{"split":"all","start":1}`, 200, []string{`"task_id":"day/2"`, `"task_id":"quiz"`}},
		{"POST", "/gridsim/num_tasks", `{}`, 422, []string{`split`}},
		{"POST", "/gridsim/num_tasks", `{"split":"nope"}`, 404, []string{`nope`}},
		{"GET", "/gridsim/tasks", "", 405, []string{`POST`}},
		{"GET", "/other/splits", "", 404, []string{`other\" not found`}},
		{"POST", "/gridsim/bogus", `{}`, 404, nil},
	}
	for _, tc := range cases {
		code, body := do(t, tc.method, ts.url(tc.path), "", tc.body)
		if code != tc.status {
			t.Errorf("%s %s: %d %s, want %d", tc.method, tc.path, code, body, tc.status)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(body, w) {
				t.Errorf("%s %s: %s lacks %s", tc.method, tc.path, body, w)
			}
		}
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
		want string
	}{
		{"no player", Options{Catalog: fakeCatalog{}}, "Player"},
		{"no catalog", Options{Player: newFakePlayer()}, "Catalog"},
		{"negative capacity", Options{Player: newFakePlayer(), Catalog: fakeCatalog{}, MaxConcurrentEnvs: -1}, "at least 1"},
		{"negative idle", Options{Player: newFakePlayer(), Catalog: fakeCatalog{}, IdleTimeout: -1}, "idle"},
	} {
		if _, err := New(tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want error with %q", tc.name, err, tc.want)
		}
	}
}

func TestMetricsSeries(t *testing.T) {
	restarts := 0.0
	ts := startServer(t, Options{PluginRestarts: func() float64 { restarts++; return restarts }})
	c := ts.dial(t, "")
	c.observation(t, `{"type":"reset","data":{"task_id":"quiz"}}`)
	c.observation(t, `{"type":"step","data":{"reply":"a"}}`)
	c.observation(t, `{"type":"step","data":{"reply":"done"}}`)
	c.error(t, `{"type":"nope"}`)
	// Phase times and outcomes come from the engine (its Observer); the
	// fake player has none: core/runtime's TestMetricsFromTheEngine.
	wait.Until(t, "teardown done", func() bool {
		v, _ := metricValue(t, ts, "", `agentenv_episodes_live`)
		return v == 0
	})
	for series, want := range map[string]float64{
		`agentenv_errors_total{code="UNKNOWN_TYPE"}`: 1,
		`agentenv_episodes_total{outcome="done"}`:    1,
		`agentenv_reset_queue_wait_seconds_count`:    1,
		`agentenv_sessions_open`:                     1,
		`agentenv_episodes_live`:                     0,
		`agentenv_reset_queue_depth`:                 0,
	} {
		if v, ok := metricValue(t, ts, "", series); !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", series, v, ok, want)
		}
	}
	if v, ok := metricValue(t, ts, "", "agentenv_plugin_restarts_total"); !ok || v < 1 {
		t.Errorf("plugin restarts not read at scrape: %v %v", v, ok)
	}
}
