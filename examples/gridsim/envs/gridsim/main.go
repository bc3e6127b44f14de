// Command gridsim-env serves GridSim's env: an MCP streamable-HTTP server
// at /mcp on 127.0.0.1:$AGENTENV_PORT (18765 without it). In a container,
// run it with --host 0.0.0.0 so the published port reaches it.
//
// The bundle builds it statically (CGO_ENABLED=0) into bin/gridsim-env, which
// both the process sandbox and the FROM-scratch image run.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/hashicorp/go-hclog"

	"github.com/agentenv/agentenv/examples/gridsim/gridenv"
	"github.com/agentenv/agentenv/internal/envserve"
)

func main() {
	log := hclog.New(&hclog.LoggerOptions{Name: "gridsim-env", Output: os.Stderr, Level: hclog.Info})
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := envserve.Run(ctx, "gridsim-env", os.Args[1:], log, gridenv.New(log).Handler()); err != nil {
		log.Error("exiting", "error", err)
		os.Exit(1)
	}
}
