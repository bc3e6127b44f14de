package runtime

import (
	"bytes"
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/agentenv/agentenv/client"
	"github.com/agentenv/agentenv/core/server"
)

// syncBuffer is a log sink safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// An env that prints a credential and exits fails its deploy. A remote
// client is told DEPLOY_FAILED, the env and a short cause, on the socket
// and on the catalogue, and nothing of the server's paths, the env's
// command line or its output; the server's log has all of it. With
// ErrorDetail (a server only its operator uses) the client gets it too.
func TestDeployFailuresTellClientsLittle(t *testing.T) {
	const secret = "sk-live-7f3a9c"
	for _, detail := range []bool{false, true} {
		t.Run(map[bool]string{false: "remote clients", true: "error detail"}[detail], func(t *testing.T) {
			rt := openRuntime(t, `env = { TESTENV_FAIL_START = "1", TESTENV_SAY = "using token `+secret+`" }`)
			logs := &syncBuffer{}
			srv, err := server.New(server.Options{
				Player: rt.Engine, Catalog: server.NewBundleCatalog(rt.Bundle), ErrorDetail: detail,
				Logger: hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Info}),
			})
			if err != nil {
				t.Fatal(err)
			}
			ts := httptest.NewServer(srv.Handler())
			defer ts.Close()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			sess, err := client.Dial(ctx, ts.URL, client.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer sess.Close()
			_, resetErr := sess.Reset(ctx, client.ResetRequest{TaskID: "puzzle"})
			c, err := client.New(ts.URL, client.Options{})
			if err != nil {
				t.Fatal(err)
			}
			// No deadline: the client tries once (it waits out 502s, the
			// status of DEPLOY_FAILED, until its deadline).
			_, toolsErr := c.ToolsetTools(context.Background(), rt.Bundle.Toolsets()[0].ID)
			for what, err := range map[string]error{"reset": resetErr, "toolset": toolsErr} {
				var ce *client.Error
				if !errors.As(err, &ce) || ce.Code != client.Code("DEPLOY_FAILED") {
					t.Fatalf("%s: %v, want DEPLOY_FAILED", what, err)
				}
				for _, leak := range []string{secret, testenvBin, rt.Bundle.Dir, "failing to start"} {
					if !detail && strings.Contains(ce.Message, leak) {
						t.Errorf("%s: message %q shows %q", what, ce.Message, leak)
					}
				}
				if detail && (!strings.Contains(ce.Message, secret) || strings.HasPrefix(ce.Message, "DEPLOY_FAILED")) {
					t.Errorf("%s: with ErrorDetail the message is %q", what, ce.Message)
				}
				if !strings.Contains(ce.Message, `env "testenv"`) {
					t.Errorf("%s: message %q does not name the env", what, ce.Message)
				}
				if !detail && !strings.Contains(ce.Message, "the server's log has the details") {
					t.Errorf("%s: message %q does not say where the details are", what, ce.Message)
				}
			}
			if log := logs.String(); !strings.Contains(log, secret) || !strings.Contains(log, "failing to start") {
				t.Errorf("the server's log lacks the detail:\n%s", log)
			}
		})
	}
}

// An env that dies mid-episode fails the step with EXECUTION_ERROR naming
// the env, its sandbox and what went wrong; a remote client is not shown
// the env's internal address (127.0.0.1:PORT/mcp), which only the log and
// ErrorDetail clients get.
func TestEnvCrashTellsClientsLittle(t *testing.T) {
	for _, detail := range []bool{false, true} {
		t.Run(map[bool]string{false: "remote clients", true: "error detail"}[detail], func(t *testing.T) {
			rt := openRuntime(t)
			logs := &syncBuffer{}
			srv, err := server.New(server.Options{
				Player: rt.Engine, Catalog: server.NewBundleCatalog(rt.Bundle), ErrorDetail: detail,
				Logger: hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Info}),
			})
			if err != nil {
				t.Fatal(err)
			}
			ts := httptest.NewServer(srv.Handler())
			defer ts.Close()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			sess, err := client.Dial(ctx, ts.URL, client.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer sess.Close()
			if _, err := sess.Reset(ctx, client.ResetRequest{TaskID: "puzzle"}); err != nil {
				t.Fatal(err)
			}
			_, err = sess.Step(ctx, `<tool_call>{"name": "crash", "arguments": {}}</tool_call>`)
			var ce *client.Error
			if !errors.As(err, &ce) || ce.Code != client.Code("EXECUTION_ERROR") {
				t.Fatalf("step: %v, want EXECUTION_ERROR", err)
			}
			leaks := strings.Contains(ce.Message, "127.0.0.1") || strings.Contains(ce.Message, "/mcp")
			if leaks != detail {
				t.Errorf("ErrorDetail %v: message %q", detail, ce.Message)
			}
			if !strings.Contains(ce.Message, `env "testenv" (sandbox `) || !strings.Contains(ce.Message, "crash") {
				t.Errorf("message %q does not name the env, its sandbox and the call", ce.Message)
			}
			if !detail && !strings.Contains(ce.Message, "the server's log has the details") {
				t.Errorf("message %q does not say where the details are", ce.Message)
			}
			if log := logs.String(); !strings.Contains(log, "127.0.0.1") {
				t.Errorf("the server's log lacks the env's address:\n%s", log)
			}
		})
	}
}
