// Package dockertest gives tests a client of the local Docker engine
// ($DOCKER_HOST, else the default socket), for tests of Docker mode in any
// module. Without an engine the test is skipped, except under CI=true,
// where it fails: CI has one (.ci/run starts it).
package dockertest

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/moby/moby/client"
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
		if os.Getenv("CI") == "true" {
			t.Fatalf("no Docker engine (CI must have one: .ci/run starts dockerd): %v", err)
		}
		t.Skipf("no Docker engine: %v (CI runs this test)", err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}
