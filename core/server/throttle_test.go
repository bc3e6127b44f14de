package server

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentenv/agentenv/sdk/sdktest/wait"

	"github.com/hashicorp/go-hclog"
)

// lockedBuffer is a log sink safe for the server's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// clientFrom is a client whose connections come from the loopback
// address local (127.0.0.2: another client address on this machine).
func clientFrom(local string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
	return &http.Client{
		Transport:     &http.Transport{DialContext: d.DialContext},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

func postLogin(t *testing.T, c *http.Client, ts *testServer, token string) (*http.Response, string) {
	t.Helper()
	resp, err := c.PostForm(ts.url("/ui/login"), url.Values{"token": {token}})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// Wrong page logins are throttled per client address: a few are free,
// then each makes the address wait (1 s, doubling), during which its
// logins, even right ones, get 429 unchecked, saying when to try again;
// another address is not held up; a right token after the wait opens the
// page and forgets the count. They are logged in aggregate, not one line
// each. (Before: 1,500 guesses a second on one connection, a log line
// each.)
func TestPageLoginThrottled(t *testing.T) {
	logs := &lockedBuffer{}
	ts := startServer(t, Options{Token: testToken, Logger: hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Info})})
	ts.HandlePage("/ui", testPage)
	th := ts.logins["/ui"]
	var mu sync.Mutex
	now := time.Now()
	th.mu.Lock()
	th.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	th.logWindow = 2 * time.Second // longer than the test's requests take, mostly
	th.mu.Unlock()
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }

	c := clientFrom("127.0.0.1")
	for i := range loginFreeFailures + 1 {
		if resp, body := postLogin(t, c, ts, "guess"); resp.StatusCode != http.StatusUnauthorized || body != "LOGIN failed=true" {
			t.Fatalf("wrong token %d: %d %q, want 401", i+1, resp.StatusCode, body)
		}
	}
	// The 6th failure made the address wait 1 s: the right token too is
	// refused, unchecked.
	resp, body := postLogin(t, c, ts, testToken)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "1" ||
		!strings.Contains(body, "Too many wrong tokens from your address: try again in 1 s.") || len(resp.Cookies()) != 0 {
		t.Fatalf("login while throttled: %d Retry-After %q %q cookies %v", resp.StatusCode, resp.Header.Get("Retry-After"), body, resp.Cookies())
	}
	// Another address logs in meanwhile.
	if resp, _ := postLogin(t, clientFrom("127.0.0.2"), ts, testToken); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login from another address: %d, want 303", resp.StatusCode)
	}
	// After the wait a wrong token is checked again and doubles the wait.
	advance(time.Second)
	if resp, _ := postLogin(t, c, ts, "guess"); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("wrong token after the wait: %d, want 401", resp.StatusCode)
	}
	if resp, _ := postLogin(t, c, ts, "guess"); resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "2" {
		t.Fatalf("next try: %d Retry-After %q, want 429 and 2", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	// The wait never passes loginMaxWait.
	for range 40 {
		advance(loginMaxWait)
		postLogin(t, c, ts, "guess")
	}
	if resp, _ := postLogin(t, c, ts, "guess"); resp.Header.Get("Retry-After") != "60" {
		t.Fatalf("after 40 more wrong tokens: Retry-After %q, want 60", resp.Header.Get("Retry-After"))
	}
	advance(loginMaxWait)
	if resp, _ := postLogin(t, c, ts, testToken); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("right token after the wait: %d, want 303", resp.StatusCode)
	}
	// The right token forgot the count: the next wrong one is free.
	if resp, _ := postLogin(t, c, ts, "guess"); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("wrong token after a login: %d, want 401", resp.StatusCode)
	}

	// One line at the first wrong token, then one line per window.
	wait.Until(t, "the summary log line", func() bool { return strings.Contains(logs.String(), "page logins refused") })
	log := logs.String()
	if n := strings.Count(log, "page login refused: wrong token"); n != 1 {
		t.Errorf("%d lines for single wrong tokens, want 1:\n%s", n, log)
	}
	if !strings.Contains(log, "wrong_tokens=") || !strings.Contains(log, "refused_while_throttled=") || strings.Contains(log, "guess") {
		t.Errorf("log:\n%s", log)
	}
	if n := strings.Count(log, "\n"); n > 4 { // 1 + a summary per window: 3 windows on a loaded machine
		t.Errorf("%d log lines for %d wrong logins:\n%s", n, 50, log)
	}
}

// Another site cannot post the login or logout form (log a user out, or
// into a session of its own): 403 and no cookie set. The page's own form
// (same origin) works.
func TestPageFormsRefuseCrossSite(t *testing.T) {
	ts := startServer(t, Options{Token: testToken})
	ts.HandlePage("/ui", testPage)
	for _, path := range []string{"/ui/logout", "/ui/login"} {
		for _, tc := range []struct {
			name   string
			header map[string]string
			want   int
		}{
			{"Sec-Fetch-Site cross-site", map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"}, http.StatusForbidden},
			{"Origin of another host", map[string]string{"Origin": "https://evil.example"}, http.StatusForbidden},
			{"same origin", map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": "http://" + ts.addr}, http.StatusSeeOther},
			{"no browser headers (curl)", nil, http.StatusSeeOther},
		} {
			req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, ts.url(path), strings.NewReader(url.Values{"token": {testToken}}.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			for k, v := range tc.header {
				req.Header.Set(k, v)
			}
			resp, err := noRedirect.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.want || (tc.want == http.StatusForbidden && (len(resp.Cookies()) != 0 || !strings.Contains(string(b), "another site"))) {
				t.Errorf("POST %s, %s: %d %q cookies %v, want %d", path, tc.name, resp.StatusCode, b, resp.Cookies(), tc.want)
			}
		}
	}
}

func TestClientKey(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:5000":                "127.0.0.1",
		"[::ffff:10.0.0.1]:80":          "10.0.0.1",
		"[2001:db8:1:2:3:4:5:6]:443":    "2001:db8:1:2::/64",
		"[2001:db8:1:2:ffff:4:5:6]:443": "2001:db8:1:2::/64",
		"unix-socket-peer":              "unix-socket-peer",
	} {
		if got := clientKey(in); got != want {
			t.Errorf("clientKey(%q) = %q, want %q", in, got, want)
		}
	}
}
