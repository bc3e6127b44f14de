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

	"github.com/agentenv/agentenv/examples/inbox/inboxenv"
	"github.com/agentenv/agentenv/examples/inbox/mailbox"
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

// run serves until ctx ends (SIGTERM), then shuts down.
func run(ctx context.Context, args []string, log hclog.Logger) error {
	fs := flag.NewFlagSet("inbox-env", flag.ContinueOnError)
	host := fs.String("host", "127.0.0.1", "address to listen on")
	port := fs.Int("port", 0, "port to listen on (default $AGENTENV_PORT, else 18765)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *port == 0 {
		*port = 18765
		if v := os.Getenv("AGENTENV_PORT"); v != "" {
			p, err := strconv.Atoi(v)
			if err != nil || p < 1 || p > 65535 {
				return fmt.Errorf("AGENTENV_PORT=%q is not a port number (1-65535)", v)
			}
			*port = p
		}
	}
	box, err := mailbox.Committed()
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", inboxenv.New(box, log).Handler())
	addr := net.JoinHostPort(*host, strconv.Itoa(*port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", addr, err)
	}
	// Requests live on ctx, so an open MCP stream ends with it.
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	log.Info("serving MCP", "url", "http://"+addr+"/mcp", "emails", len(box.Emails))
	select {
	case err := <-served:
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}
	// The env holds nothing worth draining: give in-flight calls a second,
	// well inside the sandbox's SIGTERM grace, then close the rest.
	log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("shutting down: %w", err)
	}
	_ = srv.Close()
	return nil
}
