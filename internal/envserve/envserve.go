// Package envserve is the start-up the example envs' binaries share: an
// MCP handler served at /mcp on 127.0.0.1:$AGENTENV_PORT (the port the
// sandbox gives an env), or where --host and --port say, until the context
// ends (SIGTERM), then shut down.
package envserve

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
)

// DefaultPort is the port without AGENTENV_PORT or --port.
const DefaultPort = 18765

// PortEnv names the variable the sandbox sets to the port an env must
// listen on.
const PortEnv = "AGENTENV_PORT"

// ResetToolEnv names the variable agentenv sets, for an env whose env.toml
// declares reuse = N, to the name of the reset tool it must serve
// (bundle.ResetToolVar; kept apart so env binaries need not link the
// bundle loader).
const ResetToolEnv = "AGENTENV_RESET_TOOL"

// Port is $AGENTENV_PORT, or DefaultPort when it is unset; a value that is
// no port number is an error naming it.
func Port() (int, error) {
	v := os.Getenv(PortEnv)
	if v == "" {
		return DefaultPort, nil
	}
	p, err := strconv.Atoi(v)
	if err != nil || p < 1 || p > 65535 {
		return 0, fmt.Errorf("%s=%q is not a port number (1-65535)", PortEnv, v)
	}
	return p, nil
}

// Main is an env binary's whole main: it logs to stderr as name, makes
// the MCP handler with that logger, and serves it (Run) until SIGTERM or
// SIGINT; an error is logged and exits 1.
func Main(name string, handler func(hclog.Logger) (http.Handler, error)) {
	log := hclog.New(&hclog.LoggerOptions{Name: name, Output: os.Stderr, Level: hclog.Info})
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	h, err := handler(log)
	if err == nil {
		err = Run(ctx, name, os.Args[1:], log, h)
	}
	if err != nil {
		log.Error("exiting", "error", err)
		stop()
		os.Exit(1)
	}
}

// shutdownGrace is how long in-flight calls get after the context ends:
// an env is one episode's and holds nothing worth draining, and this is
// well inside the sandbox's SIGTERM grace.
const shutdownGrace = time.Second

// Run parses the command line args of the env named name (--host, --port),
// listens, and serves mcp at /mcp until ctx ends, then shuts down. A
// flag, port or listen error is returned before anything is served.
func Run(ctx context.Context, name string, args []string, log hclog.Logger, mcp http.Handler) error {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	host := fs.String("host", "127.0.0.1", "address to listen on (0.0.0.0 in a container, so the published port reaches it)")
	port := fs.Int("port", 0, fmt.Sprintf("port to listen on (default $%s, else %d)", PortEnv, DefaultPort))
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *port == 0 {
		p, err := Port()
		if err != nil {
			return err
		}
		*port = p
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcp)
	addr := net.JoinHostPort(*host, strconv.Itoa(*port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", addr, err)
	}
	// Requests live on ctx: a client's open MCP stream (the hanging GET)
	// ends on SIGTERM instead of holding Shutdown for its whole timeout.
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	log.Info("serving MCP", "url", "http://"+addr+"/mcp")
	select {
	case err := <-served:
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down")
	// Give in-flight calls a moment, then close what is left (an open MCP
	// stream does not always end with the request context, so Shutdown
	// alone could wait it out).
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("shutting down: %w", err)
	}
	_ = srv.Close()
	return nil
}
