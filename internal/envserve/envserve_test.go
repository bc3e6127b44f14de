package envserve

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentenv/agentenv/sdk/sdktest/wait"

	"github.com/hashicorp/go-hclog"

	"github.com/agentenv/agentenv/core/bundle"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Start-up errors name what is wrong.
func TestRunRefusals(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	busyPort := strconv.Itoa(busy.Addr().(*net.TCPAddr).Port)
	cases := []struct {
		name, env string
		args      []string
		want      string
	}{
		{"port not a number", "eighty", nil, `AGENTENV_PORT="eighty" is not a port number (1-65535)`},
		{"port out of range", "70000", nil, `AGENTENV_PORT="70000" is not a port number`},
		{"port in use", busyPort, nil, "listening on 127.0.0.1:" + busyPort},
		{"flag port in use", "", []string{"--port", busyPort}, "listening on 127.0.0.1:" + busyPort},
		{"unknown flag", "", []string{"--verbose"}, "flag provided but not defined"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv(PortEnv, c.env)
			err := Run(context.Background(), "test-env", c.args, hclog.NewNullLogger(), http.NotFoundHandler())
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Run(%v) with AGENTENV_PORT=%q: %v, want an error saying %q", c.args, c.env, err, c.want)
			}
		})
	}
}

// It serves the handler at /mcp on $AGENTENV_PORT, and returns cleanly
// when its context ends (SIGTERM), an MCP session still open.
func TestRunServesUntilCancelled(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	t.Setenv(PortEnv, strconv.Itoa(port))
	server := mcp.NewServer(&mcp.Implementation{Name: "test-env", Version: "1"}, nil)
	type in struct {
		Text string `json:"text"`
	}
	mcp.AddTool(server, &mcp.Tool{Name: "echo"}, func(_ context.Context, _ *mcp.CallToolRequest, a in) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: a.Text}}}, nil, nil
	})
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	done := make(chan error, 1)
	go func() { done <- Run(ctx, "test-env", nil, hclog.NewNullLogger(), handler) }()

	c := mcp.NewClient(&mcp.Implementation{Name: "envserve-test", Version: "1"}, nil)
	var cs *mcp.ClientSession
	wait.For(t, "the env to answer", func() error {
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		cs, err = c.Connect(cctx, &mcp.StreamableClientTransport{Endpoint: "http://127.0.0.1:" + strconv.Itoa(port) + "/mcp"}, nil)
		return err
	})
	defer cs.Close()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
	if err != nil || res.IsError || res.Content[0].(*mcp.TextContent).Text != "hi" {
		t.Fatalf("echo: %v %+v", err, res)
	}

	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run returned %v after its context ended", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("Run still serving 60 s after its context ended")
	}
}

// The variable env binaries read is the one the engine sets.
func TestResetToolEnvIsTheBundles(t *testing.T) {
	if ResetToolEnv != bundle.ResetToolVar {
		t.Fatalf("envserve.ResetToolEnv %q, bundle.ResetToolVar %q", ResetToolEnv, bundle.ResetToolVar)
	}
}
