// Command gridsim-env serves GridSim's env: an MCP streamable-HTTP server
// at /mcp on 127.0.0.1:$AGENTENV_PORT (18765 without it). In a container,
// run it with --host 0.0.0.0 so the published port reaches it.
//
// The bundle builds it statically (CGO_ENABLED=0) into bin/gridsim-env, which
// both the process sandbox and the FROM-scratch image run.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/agentenv/agentenv/examples/gridsim/gridenv"
)

const defaultPort = 18765

func main() {
	log := hclog.New(&hclog.LoggerOptions{Name: "gridsim-env", Output: os.Stderr, Level: hclog.Info})
	if err := run(os.Args[1:], log); err != nil {
		log.Error("exiting", "error", err)
		os.Exit(1)
	}
}

func run(args []string, log hclog.Logger) error {
	fs := flag.NewFlagSet("gridsim-env", flag.ContinueOnError)
	host := fs.String("host", "127.0.0.1", "address to listen on")
	port := fs.Int("port", 0, "port to listen on (default $AGENTENV_PORT, else 18765)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *port == 0 {
		*port = defaultPort
		if v := os.Getenv("AGENTENV_PORT"); v != "" {
			p, err := strconv.Atoi(v)
			if err != nil || p < 1 || p > 65535 {
				return fmt.Errorf("AGENTENV_PORT=%q is not a port number", v)
			}
			*port = p
		}
	}

	mux := http.NewServeMux()
	mux.Handle("/mcp", gridenv.New(log).Handler())
	addr := net.JoinHostPort(*host, strconv.Itoa(*port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", addr, err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	// Requests live on ctx: a client's open MCP stream (the hanging GET)
	// ends on SIGTERM instead of holding Shutdown for its whole timeout.
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	log.Info("serving MCP", "url", "http://"+addr+"/mcp")

	select {
	case err := <-done:
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down")
	// An env is one episode's and holds nothing worth draining: give
	// in-flight calls a moment, well inside the sandbox's SIGTERM grace,
	// then close what is left. (An open MCP stream does not always end
	// with the request context, so Shutdown alone could wait it out.)
	shutdownCtx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("shutting down: %w", err)
	}
	_ = srv.Close()
	return nil
}
