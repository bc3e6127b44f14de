package server

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentenv/agentenv/client"
)

// A server with a Readiness listens while its envs build: /health says
// what builds, every other request is a 503 PREPARING naming the env (a
// wrong token is still told so), and a client that waits out a 503 gets
// its session once the envs are ready.
func TestPreparingServer(t *testing.T) {
	ready := NewReadiness([]string{"gridsim", "inbox"})
	ts := startServer(t, Options{Token: testToken, Readiness: ready})
	ready.Building("gridsim")

	status, body := get(t, ts.url("/health"), "")
	var h PreparingStatus
	if err := json.Unmarshal([]byte(body), &h); err != nil || status != 503 {
		t.Fatalf("/health while preparing: %d %s (%v)", status, body, err)
	}
	if h.Status != "preparing" || len(h.Envs) != 2 || h.Envs[0] != (EnvStatus{Env: "gridsim", State: "building", ElapsedS: h.Envs[0].ElapsedS}) ||
		h.Envs[1].State != "waiting" || !strings.Contains(h.Message, "env gridsim is building") || !strings.Contains(h.Message, "1 more to build") {
		t.Fatalf("/health while preparing: %+v", h)
	}
	for _, path := range []string{"/splits", "/metadata", "/tasks/day/eval-001", "/ws"} {
		status, body := get(t, ts.url(path), testToken)
		var e struct{ Detail, Code string }
		_ = json.Unmarshal([]byte(body), &e)
		if status != 503 || e.Code != CodePreparing || !strings.Contains(e.Detail, "env gridsim is building") {
			t.Errorf("%s while preparing: %d %s; want 503 PREPARING naming the env", path, status, body)
		}
	}
	if status, _ := get(t, ts.url("/splits"), "wrong"); status != 401 {
		t.Errorf("/splits with a wrong token while preparing: %d, want 401", status)
	}
	if status, _ := get(t, ts.url("/metrics"), testToken); status != 200 {
		t.Errorf("/metrics while preparing: %d, want 200", status)
	}
	// The liveness probe's path stays 200, without the token.
	if status, body := get(t, ts.url("/livez"), ""); status != 200 || !strings.Contains(body, `"alive"`) {
		t.Errorf("/livez while preparing: %d %s, want 200", status, body)
	}

	// The Go client waits it out: the envs become ready once it has been
	// told PREPARING.
	told := make(chan error, 1)
	c, err := client.New("http://"+ts.addr, client.Options{Token: testToken, OnRetry: func(err error, _ time.Duration) {
		select {
		case told <- err:
		default:
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	connected := make(chan error, 1)
	var sess *client.Session
	go func() {
		var err error
		sess, err = c.Connect(ctx)
		connected <- err
	}()
	if err := <-told; !errors.Is(err, client.CodePreparing) || !strings.Contains(err.Error(), "env gridsim is building") {
		t.Fatalf("the client was told %v, want PREPARING naming the env", err)
	}
	ready.Built("gridsim")
	ready.Building("inbox")
	ready.Built("inbox")
	ready.Ready()
	if err := <-connected; err != nil {
		t.Fatalf("connect after ready: %v", err)
	}
	defer sess.Close()
	if _, err := sess.Reset(ctx, client.ResetRequest{TaskID: "day/eval-001"}); err != nil {
		t.Fatalf("reset after ready: %v", err)
	}
	if status, body := get(t, ts.url("/health"), ""); status != 200 || !strings.Contains(body, "healthy") {
		t.Fatalf("/health when ready: %d %s", status, body)
	}
}

func TestReadinessMessages(t *testing.T) {
	r := NewReadiness([]string{"a", "b"})
	if got := r.Status().Message; got != "still preparing: 2 envs wait to be built" {
		t.Errorf("before any build: %q", got)
	}
	if got := NewReadiness([]string{"a"}).Status().Message; got != "still preparing: 1 env waits to be built" {
		t.Errorf("one env before its build: %q", got)
	}
	r.Building("a")
	r.Built("a")
	r.Building("b")
	st := r.Status()
	if !strings.HasPrefix(st.Message, "still preparing: env b is building (") || strings.Contains(st.Message, "more to build") {
		t.Errorf("last env building: %q", st.Message)
	}
	if st.Envs[0].State != "ready" || st.Envs[1].State != "building" {
		t.Errorf("states: %+v", st.Envs)
	}
	if r.IsReady() || !(*Readiness)(nil).IsReady() {
		t.Error("IsReady before Ready, or a nil Readiness not ready")
	}
}
