// Package dockertest gives tests a client of the local Docker engine
// ($DOCKER_HOST, else the default socket), for tests of Docker mode in any
// module. Without an engine the test is skipped, except under CI=true,
// where it fails: CI has one (.ci/run starts it).
package dockertest

import (
	"context"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/agentenv/agentenv/sdk/sdktest"
)

// Client returns a client of the engine, closed when the test ends.
func Client(t testing.TB) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cli, err := client.New(client.FromEnv)
	if err == nil {
		if _, err = cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
			cli.Close()
		}
	}
	if err != nil {
		sdktest.Missing(t, "a Docker engine", err.Error(),
			"apt-get install docker.io, then dockerd --storage-driver vfs --iptables=false --bridge=none (as .ci/run does)")
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}
