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
	deadline := time.Now().Add(10 * time.Second)
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
	case <-time.After(5 * time.Second):
		t.Fatal("run still serving 5 s after its context ended")
	}
}
