// Command inbox-env serves the inbox example's env: an MCP streamable-HTTP
// server at /mcp on 127.0.0.1:$AGENTENV_PORT (18765 without it), over the
// mailbox built into it. In a container, run it with --host 0.0.0.0 so the
// published port reaches it.
//
// The bundle builds it statically (CGO_ENABLED=0) into bin/inbox-env, which
// both the process sandbox and the FROM-scratch image run.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/hashicorp/go-hclog"

	"github.com/agentenv/agentenv/examples/inbox/inboxenv"
	"github.com/agentenv/agentenv/examples/inbox/mailbox"
	"github.com/agentenv/agentenv/internal/envserve"
)

func main() {
	log := hclog.New(&hclog.LoggerOptions{Name: "inbox-env", Output: os.Stderr, Level: hclog.Info})
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := run(ctx, os.Args[1:], log); err != nil {
		log.Error("exiting", "error", err)
		os.Exit(1)
	}
}

// run serves the committed mailbox until ctx ends (SIGTERM).
func run(ctx context.Context, args []string, log hclog.Logger) error {
	box, err := mailbox.Committed()
	if err != nil {
		return err
	}
	log.Info("mailbox loaded", "emails", len(box.Emails))
	return envserve.Run(ctx, "inbox-env", args, log, inboxenv.New(box, log).Handler())
}
