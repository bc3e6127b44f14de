package server

import (
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

// orsCase is one request to the ORS-style task API and what it answers:
// the whole JSON body when json is set, else an error's code and part of
// its detail; allow is the Allow header a 405 names.
type orsCase struct {
	method, path, body string
	status             int
	json               string
	code, detail       string
	allow              string
}

// orsCases pins every path and method the ORS-style task API answers
// (bundle "gridsim", fakeCatalog's tasks), its refusals included.
var orsCases = []orsCase{
	{method: "GET", path: "/list_environments", status: 200, json: `["gridsim"]`},
	{method: "POST", path: "/list_environments", status: 404, code: CodeNotFound, detail: "no such endpoint: /list_environments"},

	{method: "GET", path: "/gridsim/splits", status: 200, json: `[{"name":"all","type":"validation"},{"name":"train","type":"train"}]`},
	{method: "POST", path: "/gridsim/splits", status: 405, code: CodeValidation, detail: "/gridsim/splits needs GET", allow: "GET"},

	{method: "POST", path: "/gridsim/tasks", body: `{"split":"train"}`, status: 200,
		json: `{"env_name":"gridsim","tasks":[{"index":0,"split":"train","task_id":"day/1","toolset":"ts1"},{"index":1,"split":"train","task_id":"day/2","toolset":"ts1"}]}`},
	{method: "GET", path: "/gridsim/tasks", status: 405, code: CodeValidation, detail: "/gridsim/tasks needs POST", allow: "POST"},
	{method: "PUT", path: "/gridsim/tasks", body: `{"split":"all"}`, status: 405, code: CodeValidation, detail: "needs POST", allow: "POST"},
	{method: "POST", path: "/gridsim/tasks", body: `{`, status: 422, code: CodeValidation, detail: "request body: "},
	{method: "POST", path: "/gridsim/tasks", body: `{}`, status: 422, code: CodeValidation, detail: `"split" is required`},
	{method: "POST", path: "/gridsim/tasks", body: `{"split":"nope"}`, status: 404, code: CodeNotFound, detail: "nope"},
	{method: "POST", path: "/gridsim/tasks", body: `{"split":"all","pad":"` + strings.Repeat("x", 1<<20) + `"}`, status: 422, code: CodeValidation, detail: "request body too large"},

	{method: "POST", path: "/gridsim/num_tasks", body: `{"split":"all"}`, status: 200, json: `{"num_tasks":3}`},
	{method: "POST", path: "/gridsim/num_tasks", body: `{"split":"train"}`, status: 200, json: `{"num_tasks":2}`},
	{method: "GET", path: "/gridsim/num_tasks", status: 405, code: CodeValidation, detail: "needs POST", allow: "POST"},
	{method: "POST", path: "/gridsim/num_tasks", body: `{"split":"nope"}`, status: 404, code: CodeNotFound, detail: "nope"},

	{method: "POST", path: "/gridsim/task", body: `{"split":"all","index":2}`, status: 200, json: `{"task":{"index":2,"split":"all","task_id":"quiz","toolset":"ts2"}}`},
	{method: "POST", path: "/gridsim/task", body: `{"split":"all"}`, status: 400, code: CodeValidation, detail: "Invalid task index"},
	{method: "POST", path: "/gridsim/task", body: `{"split":"all","index":-1}`, status: 400, code: CodeValidation, detail: "Invalid task index"},
	{method: "POST", path: "/gridsim/task", body: `{"split":"all","index":3}`, status: 400, code: CodeValidation, detail: "Invalid task index"},
	{method: "POST", path: "/gridsim/task", body: `{"split":"nope","index":0}`, status: 404, code: CodeNotFound, detail: "nope"},
	{method: "GET", path: "/gridsim/task", status: 405, code: CodeValidation, detail: "needs POST", allow: "POST"},

	{method: "POST", path: "/gridsim/task_range", body: `{"split":"all","start":1}`, status: 200,
		json: `{"tasks":[{"index":1,"split":"all","task_id":"day/2","toolset":"ts1"},{"index":2,"split":"all","task_id":"quiz","toolset":"ts2"}]}`},
	{method: "POST", path: "/gridsim/task_range", body: `{"split":"all","start":0,"stop":1}`, status: 200,
		json: `{"tasks":[{"index":0,"split":"all","task_id":"day/1","toolset":"ts1"}]}`},
	{method: "POST", path: "/gridsim/task_range", body: `{"split":"all","start":5}`, status: 200, json: `{"tasks":[]}`},
	{method: "POST", path: "/gridsim/task_range", body: `{"split":"all","start":-1}`, status: 400, code: CodeValidation, detail: "must not be negative"},
	{method: "POST", path: "/gridsim/task_range", body: `{"split":"all","stop":-1}`, status: 400, code: CodeValidation, detail: "must not be negative"},
	{method: "POST", path: "/gridsim/task_range", body: `{"split":"all","start":2,"stop":1}`, status: 400, code: CodeValidation, detail: "start 2 is past stop 1"},
	{method: "POST", path: "/gridsim/task_range", body: `{"split":"nope"}`, status: 404, code: CodeNotFound, detail: "nope"},
	{method: "GET", path: "/gridsim/task_range", status: 405, code: CodeValidation, detail: "needs POST", allow: "POST"},

	// Another environment's name is named as not served, whatever the
	// operation; any other path is no endpoint.
	{method: "GET", path: "/other/splits", status: 404, code: CodeNotFound, detail: `Environment "other" not found; this server serves "gridsim"`},
	{method: "POST", path: "/other/tasks", body: `{"split":"all"}`, status: 404, code: CodeNotFound, detail: `Environment "other" not found`},
	{method: "POST", path: "/other/bogus", body: `{}`, status: 404, code: CodeNotFound, detail: `Environment "other" not found`},
	{method: "POST", path: "/gridsim/bogus", body: `{}`, status: 404, code: CodeNotFound, detail: "no such endpoint: /gridsim/bogus"},
	{method: "GET", path: "/gridsim", status: 404, code: CodeNotFound, detail: "no such endpoint: /gridsim"},
	{method: "GET", path: "/gridsim/", status: 404, code: CodeNotFound, detail: "no such endpoint: /gridsim/"},
	{method: "GET", path: "/gridsim/splits/x", status: 404, code: CodeNotFound, detail: "no such endpoint: /gridsim/splits/x"},
	{method: "GET", path: "/nowhere", status: 404, code: CodeNotFound, detail: "no such endpoint: /nowhere"},
	{method: "DELETE", path: "/", status: 404, code: CodeNotFound, detail: "no such endpoint: /"},

	// As on the server's other routes (net/http's patterns): a trailing
	// slash is another path, and HEAD is answered as GET.
	{method: "GET", path: "/gridsim/splits/", status: 404, code: CodeNotFound, detail: "no such endpoint: /gridsim/splits/"},
	{method: "GET", path: "/list_environments/", status: 404, code: CodeNotFound, detail: "no such endpoint: /list_environments/"},
	{method: "HEAD", path: "/gridsim/splits", status: 200},
	{method: "HEAD", path: "/list_environments", status: 200},
	{method: "HEAD", path: "/gridsim/tasks", status: 405, allow: "POST"},
}

func TestORSTaskAPI(t *testing.T) {
	ts := startServer(t, Options{})
	for _, tc := range orsCases {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, ts.url(tc.path), strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			raw, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %.300s", resp.StatusCode, tc.status, raw)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q, want application/json", ct)
			}
			if got := resp.Header.Get("Allow"); got != tc.allow {
				t.Errorf("Allow %q, want %q", got, tc.allow)
			}
			if tc.method == http.MethodHead {
				return // no body
			}
			var got any
			if err := json.Unmarshal(raw, &got); err != nil {
				t.Fatalf("body is not JSON: %v: %.300s", err, raw)
			}
			if tc.json != "" {
				var want any
				if err := json.Unmarshal([]byte(tc.json), &want); err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("body %s, want %s", raw, tc.json)
				}
				return
			}
			e, _ := got.(map[string]any)
			detail, _ := e["detail"].(string)
			if e["code"] != tc.code || !strings.Contains(detail, tc.detail) {
				t.Errorf("error %s, want code %s and a detail with %q", raw, tc.code, tc.detail)
			}
		})
	}
}
