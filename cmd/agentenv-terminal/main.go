// Command agentenv-terminal is agentenv's terminal server (core/terminal):
// the MCP env a sandbox injects into a Harbor task's container and runs
// instead of the image's entrypoint. It serves MCP streamable HTTP at /mcp,
// offering the model shell and editor, and the engine run_tests
// (docs/harbor-tools.md).
//
//	agentenv-terminal [--host H] [--port P] [--workdir DIR] [--verifier-logs DIR]
//	agentenv-terminal drop-default-routes   (for sandboxes: see droproutes.go)
//	agentenv-terminal install DEST          (for sandboxes: see install.go)
//
// The port defaults to $AGENTENV_PORT (else 18765), the workdir to
// $AGENTENV_WORKDIR (else the current folder). It listens on all addresses
// by default, as a container's published port needs: it runs any command it
// is sent, so never run it outside a sandbox with a reachable port.
//
// Build it static (the container may have no libc): CGO_ENABLED=0 go build.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/agentenv/agentenv/core/terminal"
)

// Variables the sandbox sets.
const (
	envPort    = "AGENTENV_PORT"
	envWorkdir = "AGENTENV_WORKDIR"
)

const defaultPort = 18765

// shutdownGrace is how long in-flight calls get after SIGTERM.
const shutdownGrace = time.Second

func main() {
	if len(os.Args) == 2 && os.Args[1] == dropRoutesArg {
		os.Exit(dropRoutes(os.Stdout))
	}
	if len(os.Args) > 1 && os.Args[1] == installArg {
		os.Exit(install(os.Args[2:], os.Stderr))
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil)).With("name", "agentenv-terminal")
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := run(ctx, os.Args[1:], log); err != nil {
		// Plain text: a start-up error is read by a person, in a deploy's output.
		fmt.Fprintf(os.Stderr, "agentenv-terminal: %v\n", err)
		stop()
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, log *slog.Logger) error {
	fs := flag.NewFlagSet("agentenv-terminal", flag.ContinueOnError)
	host := fs.String("host", "0.0.0.0", "address to listen on")
	port := fs.Int("port", 0, fmt.Sprintf("port to listen on (default $%s, else %d)", envPort, defaultPort))
	workdir := fs.String("workdir", "", fmt.Sprintf("where commands run and relative paths start (default $%s, else the current folder)", envWorkdir))
	logs := fs.String("verifier-logs", terminal.DefaultVerifierLogs, "the folder test.sh writes reward.txt or reward.json to")
	maxOutput := fs.Int("max-output", terminal.DefaultMaxOutput, "bytes kept of each of a command's stdout and stderr (first and last halves)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q: this command takes only flags", fs.Args())
	}
	if *port == 0 {
		p, err := portFromEnv()
		if err != nil {
			return err
		}
		*port = p
	}
	if *workdir == "" {
		*workdir = os.Getenv(envWorkdir)
	}
	if *workdir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return fmt.Errorf("no workdir given and the current folder is unknown: %w", err)
		}
		*workdir = wd
	}
	srv, err := terminal.New(terminal.Options{Workdir: *workdir, VerifierLogs: *logs, MaxOutput: *maxOutput, Logger: log})
	if err != nil {
		return err
	}
	defer srv.Close()
	// Processes the model's commands leave behind become ours (PID 1 in a
	// container, or a subreaper elsewhere): reap them so none stays a zombie.
	reapCtx, stopReaping := context.WithCancel(context.Background())
	defer stopReaping()
	go terminal.ReapOrphans(reapCtx, log)

	mux := http.NewServeMux()
	mux.Handle("/mcp", srv.Handler())
	addr := net.JoinHostPort(*host, strconv.Itoa(*port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", addr, err)
	}
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	log.Info("serving MCP", "url", "http://"+ln.Addr().String()+"/mcp", "workdir", srv.Workdir())
	select {
	case err := <-served:
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down")
	srv.Close()
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("shutting down: %w", err)
	}
	_ = hs.Close()
	return nil
}

// portFromEnv is $AGENTENV_PORT, or the default port without it.
func portFromEnv() (int, error) {
	v := os.Getenv(envPort)
	if v == "" {
		return defaultPort, nil
	}
	p, err := strconv.Atoi(v)
	if err != nil || p < 1 || p > 65535 {
		return 0, fmt.Errorf("%s=%q is not a port number (1-65535)", envPort, v)
	}
	return p, nil
}
