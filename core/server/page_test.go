package server

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/agentenv/agentenv/sdk/sdktest/wait"
)

// testPage answers "PAGE <path>" once authorized and "LOGIN failed=<bool>"
// for the form (then the problem, if not the wrong token).
var testPage = Page{
	Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "PAGE ", r.URL.Path) }),
	Login: func(w http.ResponseWriter, _ *http.Request, status int, problem string) {
		w.WriteHeader(status)
		fmt.Fprintf(w, "LOGIN failed=%v", problem != "")
		if problem != "" && problem != LoginWrongToken {
			fmt.Fprintf(w, " %s", problem)
		}
	},
}

// noRedirect is a client that shows redirects instead of following them.
var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func login(t *testing.T, ts *testServer, token string) *http.Response {
	t.Helper()
	resp, err := noRedirect.PostForm(ts.url("/ui/login"), url.Values{"token": {token}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

func getWith(t *testing.T, ts *testServer, path string, cookies ...*http.Cookie) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, ts.url(path), nil)
	for _, c := range cookies {
		req.AddCookie(c)
	}
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// The page asks for the token once, with a form; the cookie it sets opens
// the page's paths and nothing else, and holds no token.
func TestPageLogin(t *testing.T) {
	ts := startServer(t, Options{Token: testToken})
	ts.HandlePage("/ui", testPage)

	for _, path := range []string{"/ui", "/ui/", "/ui/data.json"} {
		if code, body := getWith(t, ts, path); code != http.StatusUnauthorized || body != "LOGIN failed=false" {
			t.Errorf("GET %s without the token: %d %q, want 401 and the form", path, code, body)
		}
	}
	if code, body := get(t, ts.url("/ui/data.json"), testToken); code != http.StatusOK || body != "PAGE /ui/data.json" {
		t.Errorf("GET with the bearer token: %d %q, want the page", code, body)
	}

	const guess = "wrong-guess-1234"
	resp, err := noRedirect.PostForm(ts.url("/ui/login"), url.Values{"token": {guess}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || string(b) != "LOGIN failed=true" || len(resp.Cookies()) != 0 {
		t.Errorf("wrong token: %d %q cookies %v, want 401, the form with its error, no cookie", resp.StatusCode, b, resp.Cookies())
	}
	for k, v := range resp.Header {
		if strings.Contains(strings.Join(v, " "), guess) {
			t.Errorf("header %s echoes the guess: %v", k, v)
		}
	}

	resp = login(t, ts, testToken)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/" {
		t.Fatalf("login: %d to %q, want 303 to /ui/", resp.StatusCode, resp.Header.Get("Location"))
	}
	cookies := resp.Cookies()
	if len(cookies) != 1 {
		t.Fatalf("login set %d cookies, want 1", len(cookies))
	}
	c := cookies[0]
	if c.Path != "/ui" || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Secure || c.MaxAge <= 0 {
		t.Errorf("cookie %+v: want Path=/ui, HttpOnly, SameSite=Strict, not Secure over plain HTTP, a Max-Age", c)
	}
	if strings.Contains(c.Value, testToken) {
		t.Errorf("cookie value %q holds the token", c.Value)
	}
	for _, path := range []string{"/ui/", "/ui/episodes/ep-1"} {
		if code, body := getWith(t, ts, path, c); code != http.StatusOK || body != "PAGE "+path {
			t.Errorf("GET %s with the cookie: %d %q", path, code, body)
		}
	}
	// The cookie is the page's, not the API's.
	if code, _ := getWith(t, ts, "/metadata", c); code != http.StatusUnauthorized {
		t.Errorf("GET /metadata with the page cookie: %d, want 401", code)
	}
	// A cookie changed by hand opens nothing.
	for _, v := range []string{c.Value + "x", "9999999999." + strings.SplitN(c.Value, ".", 2)[1], "garbage", ""} {
		if code, _ := getWith(t, ts, "/ui/", &http.Cookie{Name: c.Name, Value: v}); code != http.StatusUnauthorized {
			t.Errorf("cookie %q: %d, want 401", v, code)
		}
	}
	// Nor does one from a server with another token.
	other := startServer(t, Options{Token: "another-token"})
	other.HandlePage("/ui", testPage)
	if code, _ := getWith(t, other, "/ui/", c); code != http.StatusUnauthorized {
		t.Errorf("cookie of another token: %d, want 401", code)
	}

	resp, err = noRedirect.Post(ts.url("/ui/logout"), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if out := resp.Cookies(); len(out) != 1 || out[0].Name != c.Name || out[0].MaxAge >= 0 {
		t.Errorf("logout cookies %v, want %s cleared", out, c.Name)
	}
}

// Over TLS the cookie is Secure; an expired one opens nothing.
func TestPageCookie(t *testing.T) {
	s, err := New(Options{Player: newFakePlayer(), Catalog: fakeCatalog{}, Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	s.HandlePage("/ui", testPage)
	req := httptest.NewRequest(http.MethodPost, "https://example/ui/login", strings.NewReader("token="+testToken))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.TLS = &tls.ConnectionState{}
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, req)
	cookies := rec.Result().Cookies()
	if rec.Code != http.StatusSeeOther || len(cookies) != 1 || !cookies[0].Secure {
		t.Fatalf("login over TLS: %d cookies %+v, want 303 and a Secure cookie", rec.Code, cookies)
	}
	// Behind a TLS proxy, as docs/serving.md sets one up.
	req = httptest.NewRequest(http.MethodPost, "http://127.0.0.1/ui/login", strings.NewReader("token="+testToken))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Forwarded-Proto", "https")
	rec = httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, req)
	if cookies = rec.Result().Cookies(); len(cookies) != 1 || !cookies[0].Secure {
		t.Fatalf("login behind a TLS proxy: cookies %+v, want a Secure cookie", cookies)
	}

	pc := pageCookie{name: "c", path: "/ui", key: s.token.derive("x")}
	now := time.Now()
	issued := pc.issue(now, false)
	for _, tc := range []struct {
		at   time.Time
		want bool
	}{
		{now, true},
		{now.Add(PageCookieLifetime - time.Minute), true},
		{now.Add(PageCookieLifetime + time.Second), false},
	} {
		r := httptest.NewRequest(http.MethodGet, "/ui/", nil)
		r.AddCookie(issued)
		if got := pc.valid(r, tc.at); got != tc.want {
			t.Errorf("cookie at +%s: valid %v, want %v", tc.at.Sub(now), got, tc.want)
		}
	}
}

// Without a token the page is open, as the API is; a login just goes to
// the page and sets nothing.
func TestPageWithoutToken(t *testing.T) {
	ts := startServer(t, Options{})
	ts.HandlePage("/ui", testPage)
	if code, body := getWith(t, ts, "/ui/"); code != http.StatusOK || body != "PAGE /ui/" {
		t.Errorf("GET /ui/: %d %q, want the page", code, body)
	}
	resp := login(t, ts, "anything")
	if resp.StatusCode != http.StatusSeeOther || len(resp.Cookies()) != 0 {
		t.Errorf("login without a token: %d cookies %v, want 303 and none", resp.StatusCode, resp.Cookies())
	}
}

// While the envs build the page is served (it shows that), behind the token.
func TestPageWhilePreparing(t *testing.T) {
	ready := NewReadiness([]string{"gridsim"})
	ready.Building("gridsim")
	ts := startServer(t, Options{Token: testToken, Readiness: ready})
	ts.HandlePage("/ui", testPage)
	if code, body := get(t, ts.url("/ui/"), testToken); code != http.StatusOK || body != "PAGE /ui/" {
		t.Errorf("GET /ui/ while preparing: %d %q, want the page", code, body)
	}
	if code, _ := get(t, ts.url("/ui/"), ""); code != http.StatusUnauthorized {
		t.Errorf("GET /ui/ while preparing without the token: %d, want 401", code)
	}
	if code, _ := get(t, ts.url("/metadata"), testToken); code != http.StatusServiceUnavailable {
		t.Errorf("GET /metadata while preparing: %d, want 503", code)
	}
	if l := ts.Live(); !strings.Contains(l.Preparing, "gridsim") {
		t.Errorf("Live().Preparing = %q, want the env building", l.Preparing)
	}
}

// Live lists the sessions, the episode each plays and those waiting in the
// capacity queue, as /metrics counts them.
func TestLive(t *testing.T) {
	ts := startServer(t, Options{MaxConcurrentEnvs: 1})
	playing := ts.dial(t, "")
	playing.observation(t, `{"type":"reset","data":{"task_id":"day/1","episode_id":"ep-live"}}`)
	queued := ts.dial(t, "")
	queued.sendRaw(t, `{"type":"reset","data":{"task_id":"quiz","wait_s":60}}`)
	wait.Until(t, "the second reset queued", func() bool { return ts.Live().Queued == 1 })

	l := ts.Live()
	if l.Capacity != 1 || l.Active != 1 || len(l.Sessions) != 2 {
		t.Fatalf("Live = %+v, want capacity 1, 1 active, 2 sessions", l)
	}
	var ep, waiting int
	for _, s := range l.Sessions {
		if s.ID == "" || s.Remote == "" || s.Opened.IsZero() {
			t.Errorf("session %+v: want id, remote and opened", s)
		}
		if s.Episode != nil && s.Episode.EpisodeID == "ep-live" {
			ep++
		}
		if s.WaitingSince != nil {
			waiting++
		}
	}
	if ep != 1 || waiting != 1 {
		t.Errorf("sessions %+v: want one playing ep-live, one waiting", l.Sessions)
	}
	playing.observation(t, `{"type":"step","data":{"reply":"done"}}`)
	queued.recv(t) // the queued reset got the slot
	wait.Until(t, "the queue emptied", func() bool { return ts.Live().Queued == 0 })
	playing.error(t, `{"type":"step","data":{"reply":"x"}}`) // no episode: an error reply
	if n := ts.Live().Errors[CodeNoEpisode]; n != 1 {
		t.Errorf("Live().Errors = %v, want one %s as /metrics counts it", ts.Live().Errors, CodeNoEpisode)
	}
}

// A bundle named as the page keeps its ORS task API beside the page.
func TestPageBesideORS(t *testing.T) {
	ts := startServer(t, Options{Info: Info{Name: "ui", Version: "test"}})
	ts.HandlePage("/ui", testPage)
	if code, body := get(t, ts.url("/ui/splits"), ""); code != http.StatusOK || !strings.Contains(body, `"train"`) {
		t.Errorf("GET /ui/splits: %d %s, want the ORS splits", code, body)
	}
	if code, body := do(t, http.MethodPost, ts.url("/ui/num_tasks"), "", `{"split": "all"}`); code != http.StatusOK || !strings.Contains(body, "num_tasks") {
		t.Errorf("POST /ui/num_tasks: %d %s", code, body)
	}
	if code, body := getWith(t, ts, "/ui/"); code != http.StatusOK || body != "PAGE /ui/" {
		t.Errorf("GET /ui/: %d %q, want the page", code, body)
	}
	// The page has the rest of its paths, an ORS path's other methods too.
	if code, body := do(t, http.MethodPost, ts.url("/ui/splits"), "", `{}`); code != http.StatusOK || body != "PAGE /ui/splits" {
		t.Errorf("POST /ui/splits: %d %q, want the page", code, body)
	}
	if code, body := get(t, ts.url("/ui/num_tasks"), ""); code != http.StatusOK || body != "PAGE /ui/num_tasks" {
		t.Errorf("GET /ui/num_tasks: %d %q, want the page", code, body)
	}
}
