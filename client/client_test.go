package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestNewURLs(t *testing.T) {
	cases := []struct{ in, base, ws, token string }{
		{"http://127.0.0.1:8200", "http://127.0.0.1:8200", "ws://127.0.0.1:8200/ws", ""},
		{"http://127.0.0.1:8200/", "http://127.0.0.1:8200", "ws://127.0.0.1:8200/ws", ""},
		{"127.0.0.1:8200", "http://127.0.0.1:8200", "ws://127.0.0.1:8200/ws", ""},
		{"ws://127.0.0.1:8200/ws", "http://127.0.0.1:8200", "ws://127.0.0.1:8200/ws", ""},
		{"https://h.example/prefix/", "https://h.example/prefix", "wss://h.example/prefix/ws", ""},
		{"wss://h.example/prefix/ws?x=1#f", "https://h.example/prefix", "wss://h.example/prefix/ws", ""},
		{"http://openenv:s3cret@127.0.0.1:1/x/ws", "http://127.0.0.1:1/x", "ws://127.0.0.1:1/x/ws", "s3cret"},
		{"http://user@127.0.0.1:1", "http://127.0.0.1:1", "ws://127.0.0.1:1/ws", ""},
	}
	for _, tc := range cases {
		c, err := New(tc.in, Options{})
		if err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		if c.BaseURL() != tc.base || c.ws != tc.ws || c.token != tc.token || c.HasToken() != (tc.token != "") {
			t.Errorf("%s: got base %s ws %s token %q, want %s %s %q", tc.in, c.BaseURL(), c.ws, c.token, tc.base, tc.ws, tc.token)
		}
	}
	// Options.Token wins over the URL's.
	if c, _ := New("http://u:from-url@h:1", Options{Token: "from-options"}); c.token != "from-options" {
		t.Errorf("token %q, want Options.Token", c.token)
	}
}

func TestNewRefusesBadURLsWithoutEchoingTheToken(t *testing.T) {
	for _, bad := range []string{"ftp://u:s3cret@h", "http://u:s3cret@h:99999999x", "http://u:s3cret@h/%zz", "http://u:s3cret@/x"} {
		_, err := New(bad, Options{})
		if err == nil {
			t.Errorf("%s accepted", bad)
		} else if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("error for %s shows the password: %v", bad, err)
		}
	}
}

func TestErrorIsCode(t *testing.T) {
	err := fmt.Errorf("reset: %w", &Error{Code: CodeCapacityReached, Message: "full"})
	if !errors.Is(err, CodeCapacityReached) || errors.Is(err, CodeNotFound) {
		t.Errorf("errors.Is by code is wrong for %v", err)
	}
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeCapacityReached || err.Error() != "reset: CAPACITY_REACHED: full" {
		t.Errorf("got %q", err)
	}
	if errors.Is(&Error{Status: 502, Message: "Bad Gateway"}, Code("")) {
		t.Error("an HTTP error without a code matches the empty code")
	}
}

func TestHTTPError(t *testing.T) {
	resp := func(status int, body string) *http.Response {
		return &http.Response{StatusCode: status, Body: io.NopCloser(strings.NewReader(body))}
	}
	long := strings.Repeat("x", 1000)
	cases := []struct {
		resp *http.Response
		code Code
		msg  string
	}{
		{resp(404, `{"detail": "no task \"z\"", "code": "NOT_FOUND"}`), CodeNotFound, `NOT_FOUND: no task "z"`},
		{resp(401, `{"detail": "missing or wrong token", "code": "UNAUTHORIZED"}`), CodeUnauthorized, "UNAUTHORIZED: missing or wrong token"},
		{resp(401, ``), CodeUnauthorized, "UNAUTHORIZED: Unauthorized"},
		{resp(503, `{"status": "draining"}`), CodeShuttingDown, "SHUTTING_DOWN: status draining"},
		{resp(503, `{"status": "preparing", "message": "still preparing: env gridsim is building (3s so far)"}`), CodePreparing, "PREPARING: still preparing: env gridsim is building (3s so far)"},
		{resp(503, `{"detail": "still preparing: env a is building", "code": "PREPARING"}`), CodePreparing, "PREPARING: still preparing: env a is building"},
		{resp(422, `{"detail": [{"loc": ["body"], "msg": "bad"}]}`), "", `HTTP 422: [{"loc":["body"],"msg":"bad"}]`},
		{resp(502, "<html>"+long), "", "HTTP 502: Bad Gateway <html>" + long[:194] + "…"},
	}
	for _, tc := range cases {
		e := httpError(tc.resp)
		if e.Code != tc.code || e.Error() != tc.msg || e.Status != tc.resp.StatusCode {
			t.Errorf("got %+v %q, want %s %q", e, e.Error(), tc.code, tc.msg)
		}
	}
}

func TestNotReady(t *testing.T) {
	for err, want := range map[error]bool{
		&Error{Code: CodeCapacityReached}:                       true,
		&Error{Code: CodeShuttingDown}:                          true,
		&Error{Code: CodePreparing, Status: 503}:                true,
		&Error{Status: 503}:                                     true,
		&Error{Status: 502}:                                     true,
		&Error{Code: CodeUnauthorized, Status: 401}:             false,
		&Error{Code: CodeDeployFailed}:                          false,
		&Error{Code: CodeDeployFailed, Status: 502}:             false,
		&Error{Code: CodeExecutionError, Status: 500}:           false,
		&Error{Code: CodeNotFound, Status: 404}:                 false,
		fmt.Errorf("dial: %w", syscall.ECONNREFUSED):            true,
		fmt.Errorf("%w: the server closed it", ErrDisconnected): true,
		ErrClosed:                false,
		context.DeadlineExceeded: false,
		errors.New("x509: certificate signed by unknown authority"): false,
	} {
		if got := notReady(err); got != want {
			t.Errorf("notReady(%v) = %v, want %v", err, got, want)
		}
	}
}

func TestBackoff(t *testing.T) {
	for n := 1; n < 40; n++ {
		d := backoff(n)
		ceil := min(backoffMin<<min(n-1, 15), backoffMax)
		if d < ceil/2 || d >= ceil {
			t.Errorf("backoff(%d) = %s, want in [%s, %s)", n, d, ceil/2, ceil)
		}
	}
}

// The wait a reset asks for: the caller's, else what ctx leaves less a
// margin to read the answer, else none (the server's default).
func TestResetWait(t *testing.T) {
	waitOf := func(ctx context.Context, r ResetRequest) *float64 { return r.wire(ctx).WaitS }
	if w := waitOf(context.Background(), ResetRequest{}); w != nil {
		t.Errorf("no deadline: wait_s %v, want none", *w)
	}
	if w := waitOf(context.Background(), ResetRequest{Wait: 1500 * time.Millisecond}); w == nil || *w != 1.5 {
		t.Errorf("Wait 1.5s: wait_s %v", w)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if w := waitOf(ctx, ResetRequest{}); w == nil || *w > 9 || *w < 8.5 {
		t.Errorf("10 s left: wait_s %v, want about 9", w)
	}
	ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if w := waitOf(ctx, ResetRequest{}); w == nil || *w > 58 || *w < 57.5 {
		t.Errorf("a minute left: wait_s %v, want about 58", w)
	}
}

func TestResetWire(t *testing.T) {
	for _, tc := range []struct {
		req  ResetRequest
		want string
	}{
		{ResetRequest{TaskID: "day/eval-001"}, `{"task_id":"day/eval-001"}`},
		{ResetRequest{Split: "eval", Index: 3, ToolFormat: "qwen3_coder", MaxTurns: 2, EpisodeID: "e1"},
			`{"split":"eval","index":3,"tool_format":"qwen3_coder","max_turns":2,"episode_id":"e1"}`},
		{ResetRequest{Index: 0}, `{"split":"all","index":0}`},
		// Both: sent as given, for the server to refuse with its reason.
		{ResetRequest{TaskID: "t", Split: "eval"}, `{"task_id":"t","split":"eval","index":0}`},
	} {
		b, _ := json.Marshal(tc.req.wire(context.Background()))
		if string(b) != tc.want {
			t.Errorf("%+v: got %s, want %s", tc.req, b, tc.want)
		}
	}
}
