package ui

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentenv/agentenv/core/episode"
	"github.com/agentenv/agentenv/core/server"
	"github.com/agentenv/agentenv/core/transcript"
)

// hostile is what an env or a client may put anywhere a record holds text.
const hostile = `<script>alert("pwned")</script><img src=x onerror=alert(1)>?#/`

func ptr[T any](v T) *T { return &v }

// record is an ended GridSim-like episode whose env answered with hostile.
func record(id string, reward float64, ended time.Time) *transcript.Record {
	return &transcript.Record{
		Format: transcript.Format, EpisodeID: id, TaskID: "day/eval-001", Split: "eval", Index: ptr(0),
		Prompt: []transcript.Message{{Role: "system", Content: "You run a battery."}, {Role: "user", Content: "Prices: 31 28 25"}},
		Turns: []transcript.Turn{{
			Reply:    `<tool_call>{"name": "submit_schedule", "arguments": {"schedule": [0]}}</tool_call>`,
			Calls:    []transcript.Call{{Name: "submit_schedule", Arguments: json.RawMessage(`{"schedule":[0]}`)}},
			Messages: []transcript.Message{{Role: "tool", Content: "tool result " + hostile}},
			StepS:    0.012,
		}},
		Reward: ptr(reward), Scores: map[string]float64{"grade": reward},
		Metrics: map[string]float64{"tool_calls": 1, "unparsed_calls": 0},
		Outcome: episode.OutcomeDone, Cause: episode.CauseCompleted, Source: episode.SourceNone,
		Times:   map[string]float64{"queue": 0, "deploy": 0.05, "ready": 0.01, "setup": 0.002, "step": 0.012, "tool": 0.01, "verify": 0.003, "teardown": 0.02},
		Started: ended.Add(-time.Second), Ended: ended,
	}
}

func newTestPage(t *testing.T, recs ...*transcript.Record) (*Page, *transcript.Recent) {
	t.Helper()
	recent := transcript.NewRecent(0, 0)
	for _, r := range recs {
		recent.Record(r)
	}
	now := time.Now()
	live := server.Live{Capacity: 4, Active: 1, Queued: 1, Sessions: []server.LiveSession{
		{ID: "a1b2c3d4", Remote: "127.0.0.1:5000", Opened: now.Add(-time.Minute),
			Episode: &server.LiveEpisode{EpisodeID: "ep-" + hostile, TaskID: "day/train-007", Turns: 2, Began: now.Add(-3 * time.Second)}},
		{ID: "e5f6a7b8", Remote: "127.0.0.1:5001", Opened: now, WaitingSince: &now},
	}, Outcomes: map[string]map[string]float64{"done": {"completed": 3}}, Errors: map[string]float64{"CAPACITY_REACHED": 1}}
	return New(Options{Title: "gridsim", Live: func() server.Live { return live }, Recent: recent}), recent
}

func serveGet(t *testing.T, p *Page, path string) (*http.Response, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	p.Server().Handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	resp := rec.Result()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// scriptTag matches an opening script tag.
var scriptTag = regexp.MustCompile(`(?i)<script\b[^>]*>`)

// checkSafe fails the test unless body is HTML whose only script is the
// page's own, nonce'd as its CSP says, and hostile text shows only escaped.
func checkSafe(t *testing.T, what string, resp *http.Response, body string, full bool) {
	t.Helper()
	if strings.Contains(body, hostile) || strings.Contains(body, "<img") || strings.Contains(body, "<script>alert") {
		t.Errorf("%s: hostile text not escaped:\n%s", what, body)
	}
	csp := resp.Header.Get("Content-Security-Policy")
	if !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "script-src 'nonce-") {
		t.Errorf("%s: CSP %q", what, csp)
	}
	tags := scriptTag.FindAllString(body, -1)
	want := 0
	if full {
		want = 1
	}
	if len(tags) != want {
		t.Errorf("%s: script tags %q, want %d (the page's own)", what, tags, want)
	}
	for _, tag := range tags {
		if !strings.Contains(csp, "'nonce-"+strings.TrimSuffix(strings.TrimPrefix(tag, `<script nonce="`), `">`)+"'") {
			t.Errorf("%s: script %s lacks the CSP's nonce (%s)", what, tag, csp)
		}
	}
	for _, ref := range []string{"http://", "https://", "//cdn"} {
		if strings.Contains(strings.ReplaceAll(body, "http://www.w3.org", ""), ref) {
			t.Errorf("%s: refers to %s: the page must use nothing from elsewhere", what, ref)
		}
	}
}

// The page lists the sessions, the queue and the episodes, and what an env
// or a client wrote shows as text, never as markup.
func TestPageShowsEverythingEscaped(t *testing.T) {
	now := time.Now()
	p, _ := newTestPage(t, record("ep-1", 1, now.Add(-2*time.Second)), record("ep-2"+hostile, 0.2, now.Add(-time.Second)))

	resp, body := serveGet(t, p, "/ui/")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /ui/: %d\n%s", resp.StatusCode, body)
	}
	checkSafe(t, "index", resp, body, true)
	for _, want := range []string{
		`href="/ui/episodes/ep-1"`, "day/eval-001", "a1b2c3d4", "waiting for a slot", "day/train-007",
		`id="queued">1<`, "reward: n=2", "score/grade: n=2", "CAPACITY_REACHED", "completed",
		"&lt;script&gt;", // the hostile episode id, as text
	} {
		if !strings.Contains(body, want) {
			t.Errorf("index lacks %q", want)
		}
	}
	// The hostile id's link is a path, escaped as one.
	if !strings.Contains(body, `href="/ui/episodes/`+url.PathEscape("ep-2"+hostile)+`"`) {
		t.Errorf("hostile episode id's link not URL-escaped:\n%s", body)
	}

	resp, body = serveGet(t, p, "/ui/live")
	checkSafe(t, "live part", resp, body, false)
	if strings.Contains(body, "<html") || !strings.Contains(body, `href="/ui/episodes/ep-1"`) {
		t.Errorf("live part: want the episodes, no page around them:\n%s", body)
	}

	resp, body = serveGet(t, p, "/ui/episodes/ep-1")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("episode page: %d", resp.StatusCode)
	}
	checkSafe(t, "episode", resp, body, true)
	for _, want := range []string{"Prices: 31 28 25", "submit_schedule", "tool result &lt;script&gt;alert(&#34;pwned&#34;)&lt;/script&gt;", "done (completed, none)", "reward 1.000"} {
		if !strings.Contains(body, want) {
			t.Errorf("episode page lacks %q:\n%s", want, body)
		}
	}

	resp, body = serveGet(t, p, "/ui/episodes/"+url.PathEscape("ep-2"+hostile))
	if resp.StatusCode != http.StatusOK {
		t.Errorf("hostile episode's page: %d", resp.StatusCode)
	}
	checkSafe(t, "hostile episode", resp, body, true)

	resp, body = serveGet(t, p, "/ui/episodes/"+url.PathEscape(hostile))
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown episode: %d, want 404", resp.StatusCode)
	}
	checkSafe(t, "unknown episode", resp, body, true)
}

// data.json carries the snapshot the page draws.
func TestPageData(t *testing.T) {
	now := time.Now()
	p, _ := newTestPage(t, record("ep-1", 1, now), record("ep-2", 0.5, now))
	resp, body := serveGet(t, p, "/ui/data.json")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("data.json: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var s struct {
		Live     server.Live  `json:"live"`
		Window   int          `json:"window"`
		Episodes []EpisodeRow `json:"episodes"`
		Splits   []SplitStats `json:"splits"`
		Phases   []PhaseStats `json:"phases"`
	}
	if err := json.Unmarshal([]byte(body), &s); err != nil {
		t.Fatalf("data.json: %v\n%s", err, body)
	}
	if s.Window != 2 || len(s.Episodes) != 2 || s.Episodes[0].EpisodeID != "ep-2" || s.Live.Queued != 1 {
		t.Errorf("data.json = %+v", s)
	}
	if len(s.Splits) != 1 || s.Splits[0].Split != "eval" || s.Splits[0].Reward.N != 2 {
		t.Errorf("splits = %+v", s.Splits)
	}
}

// The login form posts the token to the server's login path and says when
// the token was wrong, without showing what was sent.
func TestLoginForm(t *testing.T) {
	p, _ := newTestPage(t)
	for _, failed := range []bool{false, true} {
		rec := httptest.NewRecorder()
		problem := ""
		if failed {
			problem = server.LoginWrongToken
		}
		p.Server().Login(rec, httptest.NewRequest(http.MethodPost, "/ui/login", strings.NewReader("token="+hostile)), http.StatusUnauthorized, problem)
		body := rec.Body.String()
		if rec.Code != http.StatusUnauthorized || !strings.Contains(body, `action="/ui/login"`) || !strings.Contains(body, `type="password"`) {
			t.Errorf("login form (failed %v): %d\n%s", failed, rec.Code, body)
		}
		if strings.Contains(body, "gridsim") || strings.Contains(body, "Log out") {
			t.Errorf("login form shows the bundle or a log-out button:\n%s", body)
		}
		if got := strings.Contains(body, `id="login-error"`) && strings.Contains(body, "That is not the server&#39;s token"); got != failed {
			t.Errorf("login form (failed %v) shows the error: %v", failed, got)
		}
		checkSafe(t, "login", rec.Result(), body, true)
	}
}

// A DEPLOY_FAILED error's detail (server paths, env output) shows only with
// ErrorDetail, as clients get it; other errors show as they are.
func TestPageErrorDetail(t *testing.T) {
	const detail = "DEPLOY_FAILED: env gridsim: start /srv/secret/path/gridsim-env: exit status 1; output: API_KEY=hunter2"
	failed := record("ep-f", 0, time.Now())
	failed.Reward, failed.Outcome, failed.Cause, failed.Error = nil, episode.OutcomeFailed, episode.CauseDeployFailed, detail
	crashed := record("ep-c", 0, time.Now())
	crashed.Reward, crashed.Outcome, crashed.Cause, crashed.Error = nil, episode.OutcomeFailed, episode.CauseEnvCrashed, "EXECUTION_ERROR: env stopped answering"
	for _, show := range []bool{false, true} {
		recent := transcript.NewRecent(0, 0)
		recent.Record(failed)
		recent.Record(crashed)
		p := New(Options{Recent: recent, ErrorDetail: show})
		_, body := serveGet(t, p, "/ui/episodes/ep-f")
		if got := strings.Contains(body, "hunter2"); got != show {
			t.Errorf("ErrorDetail %v: the detail shows: %v\n%s", show, got, body)
		}
		if !show && !strings.Contains(body, "the server&#39;s log has the detail") {
			t.Errorf("without ErrorDetail the page does not say where the detail is:\n%s", body)
		}
		if _, body := serveGet(t, p, "/ui/episodes/ep-c"); !strings.Contains(body, "env stopped answering") {
			t.Errorf("ErrorDetail %v: an EXECUTION_ERROR is hidden:\n%s", show, body)
		}
	}
	if failed.Error != detail {
		t.Errorf("the shared record was changed: %q", failed.Error)
	}
}

// Without a token there is nothing to log out of.
func TestPageOpen(t *testing.T) {
	for _, open := range []bool{false, true} {
		p := New(Options{Title: "gridsim", Open: open})
		_, body := serveGet(t, p, "/ui/")
		if got := strings.Contains(body, `action="/ui/logout"`); got == open {
			t.Errorf("Open %v: log-out button shown: %v", open, got)
		}
		if !strings.Contains(body, `id="no-episodes"`) {
			t.Errorf("Open %v: a page with no Recent should say no episode ended:\n%s", open, body)
		}
	}
}
