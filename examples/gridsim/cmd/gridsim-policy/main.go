// Command gridsim-policy serves GridSim's scripted policies as an
// OpenAI-compatible chat endpoint, a model `agentenv eval` can score
// without a GPU:
//
//	go run ./cmd/gridsim-policy --addr 127.0.0.1:8000 --tool-format hermes
//	agentenv eval http://127.0.0.1:8200 --model-url http://127.0.0.1:8000/v1 --model greedy ...
//
// The request's model names the policy: optimal, greedy, idle, random or
// malformed. See docs/eval.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/agentenv/agentenv/examples/gridsim/policyserver"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "gridsim-policy:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("gridsim-policy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:8000", "address to listen on")
	format := fs.String("tool-format", "hermes", "the tool-call format of the replies: "+strings.Join(policyserver.Formats, " or "))
	delay := fs.Duration("delay", 0, "wait this long before each answer, as a model would take")
	level := fs.String("log-level", "info", "log level: debug, info, warn, error")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %v", fs.Args())
	}
	log := hclog.New(&hclog.LoggerOptions{Name: "gridsim-policy", Output: stderr, Level: hclog.LevelFromString(*level)})
	s, err := policyserver.New(*format, *delay, log)
	if err != nil {
		return fmt.Errorf("--tool-format: %w", err)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	log.Info("serving GridSim's policies as models", "url", "http://"+ln.Addr().String()+"/v1",
		"models", strings.Join(policyserver.Policies, ","), "tool_format", *format)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}
