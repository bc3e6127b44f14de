package main

// Tests of package client (github.com/agentenv/agentenv/client) against
// real servers: the in-process server over echoPlayer (play_test.go) and
// the agentenv binary serving GridSim (serve_test.go's helpers). They
// live here, beside those helpers, so that the client module itself
// depends on nothing but gorilla/websocket.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentenv/agentenv/sdk/sdktest/wait"

	"github.com/agentenv/agentenv/client"
	"github.com/agentenv/agentenv/core/server"
)

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func mustDial(t *testing.T, url string, opts client.Options) *client.Session {
	t.Helper()
	s, err := client.Dial(ctxFor(t, 10*time.Second), url, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// retries records what a client waited out.
type retries struct {
	mu   sync.Mutex
	errs []error
}

func (r *retries) record(err error, _ time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, err)
}

// saw reports whether a recorded error matches target (errors.Is).
func (r *retries) saw(target error) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.errs {
		if errors.Is(e, target) {
			return true
		}
	}
	return false
}

func TestClientEpisodeAndCatalogue(t *testing.T) {
	srv := startEchoServer(t, "", server.Options{Token: "tok"})
	ctx := ctxFor(t, 30*time.Second)
	s := mustDial(t, srv.base, client.Options{Token: "tok"})
	if st, err := s.State(ctx); err != nil || st != (client.State{}) {
		t.Fatalf("state before a reset: %+v %v", st, err)
	}
	res, err := s.Reset(ctx, client.ResetRequest{TaskID: "t", EpisodeID: "mine"})
	if err != nil {
		t.Fatal(err)
	}
	obs := res.Observation
	if res.Done || res.Reward != nil || obs.EpisodeID != "ep-1" || obs.TaskID != "t" || obs.Turn != 0 ||
		len(obs.Messages) != 2 || obs.Messages[0] != (client.Message{Role: "system", Content: "Be brief."}) ||
		len(obs.Tools) != 1 || obs.Tools[0].Type != "function" || obs.Tools[0].Function.Name != "echo" ||
		obs.Tools[0].Function.Description != "Echo text." || string(obs.Tools[0].Function.Parameters) != `{"type":"object"}` {
		t.Fatalf("opening: %+v", res)
	}
	if st, err := s.State(ctx); err != nil || st != (client.State{EpisodeID: "ep-1", TaskID: "t", Live: true}) {
		t.Fatalf("state after reset: %+v %v", st, err)
	}
	res, err = s.Step(ctx, "hello")
	if err != nil || res.Done || len(res.Observation.Messages) != 1 || res.Observation.Messages[0] != (client.Message{Role: "tool", Content: "echo: hello"}) ||
		res.Observation.Turn != 1 || len(res.Observation.Tools) != 0 {
		t.Fatalf("step: %+v %v", res, err)
	}
	res, err = s.Step(ctx, "done")
	if err != nil || !res.Done || res.Reward == nil || *res.Reward != 0.5 || res.Observation.Metrics["score/grade"] != 0.5 || res.Observation.Turn != 2 {
		t.Fatalf("final step: %+v %v", res, err)
	}
	if st, err := s.State(ctx); err != nil || st != (client.State{EpisodeID: "ep-1", TaskID: "t", StepCount: 2, Turn: 2, Done: true}) {
		t.Fatalf("state when done: %+v %v", st, err)
	}
	// Another episode on the same session.
	if res, err := s.Reset(ctx, client.ResetRequest{Index: 0}); err != nil || res.Observation.TaskID != "t" {
		t.Fatalf("second reset: %+v %v", res, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	<-s.Done()
	if _, err := s.Step(ctx, "done"); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("step after Close: %v, want ErrClosed", err)
	}
	if _, err := s.Reset(ctx, client.ResetRequest{TaskID: "t"}); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("reset after Close: %v, want ErrClosed", err)
	}
	if s.Close() != nil {
		t.Fatal("second Close failed")
	}
	// The first episode ended done, the second by Close.
	wait.Until(t, "2 episodes torn down", func() bool { return srv.player.closed.Load() == 2 })

	c, err := client.New(srv.base, client.Options{Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Health(ctx); err != nil {
		t.Fatal(err)
	}
	if splits, err := c.Splits(ctx); err != nil || len(splits) != 1 || splits[0] != (client.Split{Name: "all", Size: 1}) {
		t.Fatalf("splits: %+v %v", splits, err)
	}
	page, err := c.Tasks(ctx, "all", 0, -1)
	if err != nil || page.Split != "all" || page.Size != 1 || page.Start != 0 || page.Stop != 1 ||
		len(page.Tasks) != 1 || page.Tasks[0] != (client.TaskEntry{Index: 0, TaskID: "t", Toolset: "ts-echo"}) {
		t.Fatalf("tasks: %+v %v", page, err)
	}
	if task, err := c.Task(ctx, "t"); err != nil || task.TaskID != "t" || task.Toolset != "ts-echo" || task.Turns != 1 {
		t.Fatalf("task: %+v %v", task, err)
	}
	if tools, err := c.ToolsetTools(ctx, "ts-echo"); err != nil || len(tools) != 1 || tools[0].Function.Name != "echo" {
		t.Fatalf("toolset tools: %+v %v", tools, err)
	}
	// The same tools as sent: key order kept, for templates that dump them.
	if raw, err := c.ToolsetToolsJSON(ctx, "ts-echo"); err != nil ||
		string(raw) != `[{"type":"function","function":{"name":"echo","description":"Echo text.","parameters":{"type":"object"}}}]` {
		t.Fatalf("toolset tools as JSON: %s %v", raw, err)
	}
	if _, err := c.ToolsetToolsJSON(ctx, "nope"); !errors.Is(err, client.CodeNotFound) {
		t.Fatalf("tools of an unknown toolset: %v, want NOT_FOUND", err)
	}
	if m, err := c.Metadata(ctx); err != nil || m.Name != "echo" || m.Description != "echo tasks served by agentenv" || m.Readme != "" {
		t.Fatalf("metadata: %+v %v", m, err)
	}
}

// Every error code a client can meet comes back as an *client.Error with
// that code, which errors.Is finds.
func TestClientTypedErrors(t *testing.T) {
	srv := startEchoServer(t, "", server.Options{Token: "tok", MaxMessageBytes: 1 << 10})
	ctx := ctxFor(t, 30*time.Second)
	c, err := client.New(srv.base, client.Options{Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	s := mustDial(t, srv.base, client.Options{Token: "tok"})
	reset := func(id string) error {
		_, err := s.Reset(ctx, client.ResetRequest{TaskID: id})
		return err
	}
	step := func(reply string) error {
		_, err := s.Step(ctx, reply)
		return err
	}
	wrongToken := client.Options{Token: "wrong-token"}
	cases := []struct {
		name   string
		call   func() error
		code   client.Code
		status int
		msg    string
	}{
		{"step before reset", func() error { return step("hi") }, client.CodeNoEpisode, 0, "send reset first"},
		{"unknown task", func() error { return reset("zz") }, client.CodeNotFound, 0, "no such task"},
		{"deploy fails", func() error { return reset("deploy-fail") }, client.CodeDeployFailed, 0, "could not be set up"}, // the detail is the log's (--error-detail)
		{"reset both ways", func() error {
			_, err := s.Reset(ctx, client.ResetRequest{TaskID: "t", Split: "all"})
			var e *client.Error
			if errors.As(err, &e) && (len(e.Fields) != 1 || e.Fields[0].Loc[1] != "task_id") {
				t.Errorf("fields: %+v", e.Fields)
			}
			return err
		}, client.CodeValidation, 0, "either task_id or split+index"},
		{"refused reply", func() error {
			if err := reset("t"); err != nil {
				return err
			}
			return step("bad")
		}, client.CodeValidation, 0, "bad reply"},
		{"reply too large", func() error { return step(strings.Repeat("x", 2<<10)) }, client.CodeMessageTooLarge, 0, "over the limit"},
		{"env crashes", func() error { return step("crash") }, client.CodeExecutionError, 0, "env crashed"},
		{"unscored", func() error {
			if err := reset("t"); err != nil {
				return err
			}
			return step("unscored")
		}, client.CodeUnscored, 0, "no verifier"},
		{"HTTP unknown task", func() error { _, err := c.Task(ctx, "day/nope"); return err }, client.CodeNotFound, 404, "GET /tasks/day/nope: NOT_FOUND"},
		{"HTTP unknown split", func() error { _, err := c.Tasks(ctx, "nope", 0, 3); return err }, client.CodeNotFound, 404, "no such split"},
		{"HTTP unknown toolset", func() error { _, err := c.ToolsetTools(ctx, "nope"); return err }, client.CodeNotFound, 404, "no such toolset"},
		{"wrong token on the upgrade", func() error { _, err := client.Dial(ctx, srv.base, wrongToken); return err }, client.CodeUnauthorized, 401, "missing or wrong token"},
		{"no token on HTTP", func() error {
			bare, _ := client.New(srv.base, client.Options{})
			_, err := bare.Splits(ctx)
			return err
		}, client.CodeUnauthorized, 401, "missing or wrong token"},
	}
	for _, tc := range cases {
		err := tc.call()
		var e *client.Error
		if !errors.Is(err, tc.code) || !errors.As(err, &e) || e.Status != tc.status || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: got %v (%+v), want %s (HTTP %d) with %q", tc.name, err, e, tc.code, tc.status, tc.msg)
		}
		if err != nil && strings.Contains(err.Error(), "wrong-token") {
			t.Errorf("%s: the token shows in %v", tc.name, err)
		}
	}
	// The session survived every error reply.
	if _, err := s.Reset(ctx, client.ResetRequest{TaskID: "t"}); err != nil {
		t.Fatal(err)
	}
	if res, err := s.Step(ctx, "done"); err != nil || !res.Done {
		t.Fatalf("after the errors: %+v %v", res, err)
	}
}

// The token: as a Bearer header from Options, or as the URL's userinfo
// (how OpenEnv's Python client takes it), on the session and the
// catalogue alike.
func TestClientToken(t *testing.T) {
	srv := startEchoServer(t, "", server.Options{Token: "s3cret-tok"})
	ctx := ctxFor(t, 30*time.Second)
	userinfo := "http://openenv:s3cret-tok@" + srv.addr
	for name, tc := range map[string]struct {
		url  string
		opts client.Options
	}{
		"bearer":   {srv.base, client.Options{Token: "s3cret-tok"}},
		"userinfo": {userinfo, client.Options{}},
		"ws url":   {"ws://openenv:s3cret-tok@" + srv.addr + "/ws", client.Options{}},
	} {
		s, err := client.Dial(ctx, tc.url, tc.opts)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if _, err := s.Reset(ctx, client.ResetRequest{TaskID: "t"}); err != nil {
			t.Errorf("%s: reset: %v", name, err)
		}
		s.Close()
		c, _ := client.New(tc.url, tc.opts)
		if _, err := c.Splits(ctx); err != nil {
			t.Errorf("%s: splits: %v", name, err)
		}
	}
	for _, bad := range []string{"http://openenv:wr0ng@" + srv.addr, "ws://openenv:wr0ng@" + srv.addr + "/ws"} {
		_, err := client.Dial(ctx, bad, client.Options{})
		if !errors.Is(err, client.CodeUnauthorized) || strings.Contains(err.Error(), "wr0ng") {
			t.Errorf("%s: got %v, want UNAUTHORIZED without the token", bad, err)
		}
	}
}

// A session whose caller is busy (a model generating) still answers the
// server's pings, so the server keeps it.
func TestClientAnswersPingsWhileIdle(t *testing.T) {
	srv := startEchoServer(t, "", server.Options{PingInterval: 50 * time.Millisecond, PongTimeout: 2 * time.Second})
	ctx := ctxFor(t, 30*time.Second)
	// The client's own pings off: only its answers keep the session.
	s := mustDial(t, srv.base, client.Options{PingInterval: -1})
	if _, err := s.Reset(ctx, client.ResetRequest{TaskID: "t"}); err != nil {
		t.Fatal(err)
	}
	// Idle past the server's read deadline (2.05 s): the span is what the
	// test is about, and the 2 s pong timeout leaves a loaded machine room.
	time.Sleep(3 * time.Second)
	if err := s.Err(); err != nil {
		t.Fatalf("the session ended while idle: %v", err)
	}
	if res, err := s.Step(ctx, "done"); err != nil || !res.Done {
		t.Fatalf("step after an idle second: %+v %v", res, err)
	}
}

// A call whose context ends returns at once; the connection is closed (so
// the server tears the episode down) and the next reset connects again.
func TestClientCancelledStep(t *testing.T) {
	srv := startEchoServer(t, "", server.Options{})
	s := mustDial(t, srv.base, client.Options{})
	ctx := ctxFor(t, 30*time.Second)
	if _, err := s.Reset(ctx, client.ResetRequest{TaskID: "t"}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err := s.Step(ctxFor(t, 200*time.Millisecond), "slow")
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "ends the episode") || time.Since(start) > 3*time.Second {
		t.Fatalf("got %v after %s, want the deadline at once", err, time.Since(start))
	}
	select {
	case <-s.Done():
	case <-time.After(time.Second):
		t.Fatal("connection still open after a cancelled call")
	}
	if !errors.Is(s.Err(), client.ErrDisconnected) {
		t.Fatalf("Err: %v", s.Err())
	}
	if _, err := s.Step(ctx, "done"); !errors.Is(err, client.ErrDisconnected) {
		t.Fatalf("step on the closed connection: %v", err)
	}
	wait.Until(t, "the server to tear the episode down", func() bool { return srv.player.closed.Load() == 1 })
	if res, err := s.Reset(ctx, client.ResetRequest{TaskID: "t"}); err != nil || res.Observation.EpisodeID != "ep-1" {
		t.Fatalf("reset after a cancelled call: %+v %v", res, err)
	}
	if s.Err() != nil {
		t.Fatalf("Err after reconnecting: %v", s.Err())
	}
}

// With a deadline, Dial waits out a draining server (503) and one not yet
// listening (refused) until it is back on the same address.
func TestClientWaitsOutDrainAndRestart(t *testing.T) {
	old := startEchoServer(t, "", server.Options{})
	ctx := ctxFor(t, 30*time.Second)
	held := mustDial(t, old.base, client.Options{})
	if _, err := held.Reset(ctx, client.ResetRequest{TaskID: "slow-close"}); err != nil {
		t.Fatal(err)
	}
	drained := make(chan struct{})
	go func() { old.Shutdown(context.Background()); close(drained) }() // a second, for slow-close's teardown
	c, _ := client.New(old.base, client.Options{})
	// No deadline: one try each (with one, Health would wait the drain out).
	wait.For(t, "/health to say draining", func() error {
		if err := c.Health(context.Background()); !errors.Is(err, client.CodeShuttingDown) {
			return fmt.Errorf("/health: %v", err)
		}
		return nil
	}, wait.Every(5*time.Millisecond))
	var r retries
	type dialed struct {
		s   *client.Session
		err error
	}
	got := make(chan dialed, 1)
	go func() {
		s, err := client.Dial(ctx, old.base, client.Options{OnRetry: r.record})
		got <- dialed{s, err}
	}()
	<-drained
	select {
	case <-held.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the held session did not see the shutdown")
	}
	if !errors.Is(held.Err(), client.CodeShuttingDown) {
		t.Errorf("held session: Err %v, want SHUTTING_DOWN", held.Err())
	}
	// Nothing listens now.
	wait.Until(t, "a refused connection", func() bool { return r.saw(syscall.ECONNREFUSED) }, wait.Every(5*time.Millisecond))
	startEchoServer(t, old.addr, server.Options{})
	d := <-got
	if d.err != nil {
		t.Fatalf("dial across the restart: %v", d.err)
	}
	defer d.s.Close()
	if res, err := d.s.Reset(ctx, client.ResetRequest{TaskID: "t"}); err != nil || res.Observation.TaskID != "t" {
		t.Fatalf("reset on the new server: %+v %v", res, err)
	}
	var e *client.Error
	for _, err := range r.errs {
		if errors.As(err, &e) && e.Status == 503 {
			break
		}
	}
	if e == nil || e.Status != 503 || e.Code != client.CodeShuttingDown {
		t.Errorf("waited out %v, want a 503 SHUTTING_DOWN", r.errs)
	}
}

// A deadline that passes while the server stays away gives an error that
// says so and wraps both the deadline and the last failure; without a
// deadline nothing is waited for.
func TestClientDeadline(t *testing.T) {
	addr := freeAddr(t)
	start := time.Now()
	_, err := client.Dial(ctxFor(t, 700*time.Millisecond), "http://"+addr, client.Options{})
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, syscall.ECONNREFUSED) ||
		!strings.Contains(err.Error(), "gave up waiting for the server after") || time.Since(start) > 3*time.Second {
		t.Errorf("got %v after %s", err, time.Since(start))
	}
	start = time.Now()
	_, err = client.Dial(context.Background(), "http://"+addr, client.Options{})
	if !errors.Is(err, syscall.ECONNREFUSED) || strings.Contains(err.Error(), "gave up") || time.Since(start) > time.Second {
		t.Errorf("without a deadline: got %v after %s, want refused at once", err, time.Since(start))
	}
	c, _ := client.New(addr, client.Options{})
	if err := c.Health(ctxFor(t, 300*time.Millisecond)); !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("health: %v", err)
	}
}

// idleReply is idleSchedule as the model's text.
func idleReply(t *testing.T) string {
	var s string
	if err := json.Unmarshal([]byte(`"`+idleSchedule+`"`), &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// agentenv serve --max-concurrent-envs 1 and two sessions: the second
// reset waits (retrying CAPACITY_REACHED) until the first episode ends;
// when the deadline comes first, the error says so.
func TestClientWaitsOutCapacity(t *testing.T) {
	addr := freeAddr(t)
	srv := startServe(t, gridsimBundle, addr, t.TempDir(), nil, "--max-concurrent-envs", "1")
	base := "http://" + addr
	ctx := ctxFor(t, 2*time.Minute)
	a := mustDial(t, base, client.Options{})
	if _, err := a.Reset(ctx, client.ResetRequest{Split: "eval", Index: 0}); err != nil {
		t.Fatal(err)
	}
	var r retries
	b := mustDial(t, base, client.Options{OnRetry: r.record})
	got := make(chan error, 1)
	go func() {
		// A short queue wait, so that the server answers CAPACITY_REACHED
		// and the client retries.
		_, err := b.Reset(ctxFor(t, time.Minute), client.ResetRequest{Split: "eval", Index: 1, Wait: 200 * time.Millisecond})
		got <- err
	}()
	wait.Until(t, "the second reset to meet CAPACITY_REACHED", func() bool { return r.saw(client.CodeCapacityReached) })
	if _, err := a.Step(ctx, idleReply(t)); err != nil {
		t.Fatal(err)
	}
	if res, err := a.Step(ctx, "I am done."); err != nil || !res.Done || res.Reward == nil || *res.Reward != 0.2 {
		t.Fatalf("first episode: %+v %v", res, err)
	}
	if err := <-got; err != nil {
		t.Fatalf("second reset: %v", err)
	}
	if st, err := b.State(ctx); err != nil || st.TaskID != "day/eval-002" || !st.Live {
		t.Fatalf("second session: %+v %v", st, err)
	}

	// Now b holds the slot; a's reset, with 1.5 s, queues on the server
	// (wait_s from the deadline) and then gives up.
	start := time.Now()
	_, err := a.Reset(ctxFor(t, 1500*time.Millisecond), client.ResetRequest{Split: "eval", Index: 2})
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, client.CodeCapacityReached) ||
		!strings.Contains(err.Error(), "reset: gave up waiting for the server") || time.Since(start) > 30*time.Second {
		t.Fatalf("got %v after %s, want a clear deadline error", err, time.Since(start))
	}
	// b's episode is live: a clean stop tears it down (SIGKILL would leave
	// its env for the next start to reap).
	if code := srv.signalAndWait(t, syscall.SIGTERM, 30*time.Second); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

// agentenv serve stopped (SIGTERM) mid-episode and started again on the
// same address: the session learns SHUTTING_DOWN at once, and a reset
// with a deadline waits out the restart.
func TestClientWaitsOutServeRestart(t *testing.T) {
	addr := freeAddr(t)
	state := t.TempDir()
	srv := startServe(t, gridsimBundle, addr, state, nil)
	ctx := ctxFor(t, 3*time.Minute)
	var r retries
	s := mustDial(t, "http://"+addr, client.Options{OnRetry: r.record})
	if _, err := s.Reset(ctx, client.ResetRequest{TaskID: "day/eval-001"}); err != nil {
		t.Fatal(err)
	}
	if code := srv.signalAndWait(t, syscall.SIGTERM, 10*time.Second); code != 0 {
		t.Fatalf("exit %d", code)
	}
	select {
	case <-s.Done():
	case <-time.After(time.Minute):
		t.Fatal("the session did not see the shutdown")
	}
	if !errors.Is(s.Err(), client.CodeShuttingDown) {
		t.Fatalf("Err: %v, want SHUTTING_DOWN", s.Err())
	}
	if _, err := s.Step(ctx, "I am done."); !errors.Is(err, client.CodeShuttingDown) {
		t.Fatalf("step after the shutdown: %v", err)
	}
	got := make(chan error, 1)
	go func() {
		res, err := s.Reset(ctx, client.ResetRequest{TaskID: "day/eval-001"})
		if err == nil && res.Observation.TaskID != "day/eval-001" {
			err = errors.New("wrong task " + res.Observation.TaskID)
		}
		got <- err
	}()
	// The reset is waiting out the down server before it comes back.
	wait.Until(t, "the reset to meet a refused connection", func() bool { return r.saw(syscall.ECONNREFUSED) })
	again := startServe(t, gridsimBundle, addr, state, nil)
	if err := <-got; err != nil {
		t.Fatalf("reset across the restart: %v", err)
	}
	if !r.saw(syscall.ECONNREFUSED) {
		t.Errorf("waited out %v, want a refused connection", r.errs)
	}
	if res, err := s.Step(ctx, "I am done."); err != nil || !res.Done {
		t.Fatalf("step on the new server: %+v %v", res, err)
	}
	// The env goes in the background after the final reply; a clean stop
	// waits for it (a SIGKILL would leave it for the next start to reap).
	if code := again.signalAndWait(t, syscall.SIGTERM, 30*time.Second); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

// Close from another goroutine while a step runs: the step returns
// ErrClosed at once and the server tears the episode down.
func TestClientCloseDuringStep(t *testing.T) {
	srv := startEchoServer(t, "", server.Options{})
	s := mustDial(t, srv.base, client.Options{})
	ctx := ctxFor(t, 30*time.Second)
	if _, err := s.Reset(ctx, client.ResetRequest{TaskID: "t"}); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		_, err := s.Step(ctx, "slow")
		got <- err
	}()
	wait.Until(t, "the slow step to reach the server", func() bool { return srv.player.slow.Load() > 0 })
	start := time.Now()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// "At once": well before the step's 30 s context would end it.
	if err := <-got; !errors.Is(err, client.ErrClosed) || time.Since(start) > 15*time.Second {
		t.Fatalf("step: %v after %s, want ErrClosed at once", err, time.Since(start))
	}
	wait.Until(t, "the server to tear the episode down", func() bool { return srv.player.closed.Load() == 1 })
}
