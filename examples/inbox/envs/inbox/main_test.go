package main

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
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
		{"port not a number", "eighty", nil, `AGENTENV_PORT="eighty" is not a port number`},
		{"port out of range", "70000", nil, `AGENTENV_PORT="70000" is not a port number`},
		{"port in use", busyPort, nil, "listening on 127.0.0.1:" + busyPort},
		{"flag port in use", "", []string{"--port", busyPort}, "listening on 127.0.0.1:" + busyPort},
		{"unknown flag", "", []string{"--verbose"}, "flag provided but not defined"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("AGENTENV_PORT", c.env)
			err := run(context.Background(), c.args, hclog.NewNullLogger())
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("run(%v) with AGENTENV_PORT=%q: %v, want an error saying %q", c.args, c.env, err, c.want)
			}
		})
	}
}

// It serves the mailbox at /mcp on $AGENTENV_PORT, and returns cleanly
// when its context ends (SIGTERM in main), an MCP session still open.
func TestRunServesUntilCancelled(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	t.Setenv("AGENTENV_PORT", strconv.Itoa(port))
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	done := make(chan error, 1)
	go func() { done <- run(ctx, nil, hclog.NewNullLogger()) }()

	c := mcp.NewClient(&mcp.Implementation{Name: "inbox-env-test", Version: "1"}, nil)
	var cs *mcp.ClientSession
	deadline := time.Now().Add(60 * time.Second)
	for {
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		cs, err = c.Connect(cctx, &mcp.StreamableClientTransport{Endpoint: "http://127.0.0.1:" + strconv.Itoa(port) + "/mcp"}, nil)
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("env not answering: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	defer cs.Close()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "list_folders", Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("list_folders: %v %+v", err, res)
	}
	if text := res.Content[0].(*mcp.TextContent).Text; !strings.Contains(text, `{"folder":"spam","emails":4}`) {
		t.Fatalf("list_folders answered %q", text)
	}

	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run returned %v after its context ended", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("run still serving 60 s after its context ended")
	}
}
