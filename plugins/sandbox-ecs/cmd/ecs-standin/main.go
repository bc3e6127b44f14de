// Command ecs-standin serves the ECS stand-in (package standin) on a
// loopback address, running tasks' images on the local Docker engine, so
// `agentenv serve --sandbox ecs` can be tried without AWS:
//
//	ecs-standin --addr 127.0.0.1:4599 &
//	AWS_ACCESS_KEY_ID=x AWS_SECRET_ACCESS_KEY=x agentenv serve examples/gridsim \
//	  --sandbox ecs --sandbox-config endpoint_url=http://127.0.0.1:4599 \
//	  --sandbox-config region=us-east-1 --sandbox-config 'subnets=["subnet-0"]'
//
// POST /_standin/faults injects faults ({"capacity": 1}, {"stop_before_running": 1},
// {"throttle": 5, "throttle_op": "RunTask"}); GET /_standin/tasks lists the tasks.
// SIGINT or SIGTERM stops every task and removes its containers.
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
	"syscall"
	"time"

	"github.com/agentenv/agentenv/plugins/sandbox-ecs/standin"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "ecs-standin:", err)
		os.Exit(1)
	}
}

func run() error {
	addr := flag.String("addr", "127.0.0.1:4599", "address to serve the ECS API on (loopback)")
	docker := flag.Bool("docker", true, "run tasks' images on the local Docker engine (false: tasks only change state)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	var opts standin.Options
	if *docker {
		d, err := standin.NewDocker(ctx)
		if err != nil {
			return fmt.Errorf("%w (run with --docker=false for tasks without containers)", err)
		}
		opts.Runner = d
	}
	s := standin.New(opts)
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		_ = s.Close(context.Background())
		return err
	}
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(os.Stderr, "ecs-standin: ECS API on http://%s (docker: %v); sandbox config: endpoint_url=http://%s\n", ln.Addr(), *docker, ln.Addr())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err = <-served:
	case <-ctx.Done():
	}
	cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_ = srv.Shutdown(cctx)
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return errors.Join(err, s.Close(cctx))
}
