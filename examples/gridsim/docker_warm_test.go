package gridsim_test

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentenv/agentenv/sdk/sdktest/wait"

	agentclient "github.com/agentenv/agentenv/client"
	"github.com/agentenv/agentenv/plugins/sandbox-local/dockertest"
)

// The warm pool in Docker: --warm 3 under --max-concurrent-envs 4 keeps
// three containers ready; a reset takes one (the optimal policy scores 1
// on it); with two episodes live the pool shrinks to the room left; SIGKILL
// leaves the warm containers, the restart reaps them, and SIGTERM tears a
// full pool down.
func TestServeDockerWarmPool(t *testing.T) {
	cli := dockertest.Client(t)
	addr, cache := freeAddr(t), t.TempDir()
	s := serveDocker(t, addr, cache, "--warm", "3", "--max-concurrent-envs", "4")
	waitContainers := func(id string, want int) {
		t.Helper()
		wait.For(t, fmt.Sprintf("%d containers", want), func() error {
			if c, _ := objects(t, cli, id); len(c) != want {
				return fmt.Errorf("%d containers; the server's log:\n%s", len(c), s.log)
			}
			return nil
		}, wait.Timeout(2*time.Minute), wait.Every(50*time.Millisecond))
	}
	waitLog := func(s *dockerServer, want string) {
		t.Helper()
		wait.For(t, fmt.Sprintf("%q in the log", want), func() error {
			if log := s.log.String(); !strings.Contains(log, want) {
				return fmt.Errorf("not in:\n%s", log)
			}
			return nil
		}, wait.Timeout(2*time.Minute))
	}
	waitLog(s, "warm pool full: env=gridsim sandboxes=3")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	a, b := dial(t, addr), dial(t, addr)
	res, err := a.Reset(ctx, agentclient.ResetRequest{TaskID: "day/eval-002"})
	if err != nil {
		t.Fatal(err)
	}
	waitLog(s, "took a warm sandbox: episode="+res.Observation.EpisodeID)
	if _, err := b.Reset(ctx, agentclient.ResetRequest{TaskID: "day/eval-003"}); err != nil {
		t.Fatal(err)
	}
	// Two episodes and the room left: 4 containers, never more.
	waitContainers(s.id, 4)
	// An absence ("never more"): a window for a wrong fifth container to
	// show; a right server passes however loaded the machine is.
	time.Sleep(2 * time.Second)
	if c, _ := objects(t, cli, s.id); len(c) != 4 {
		t.Fatalf("with 2 live episodes under --max-concurrent-envs 4: %d containers", len(c))
	}
	if r, err := playOptimal(ctx, a, "day/eval-002", false); err != nil || r != 1 {
		t.Fatalf("on a warm sandbox the optimal policy scored %v, %v", r, err)
	}
	s.stop(t, syscall.SIGKILL)
	if c, _ := objects(t, cli, s.id); len(c) == 0 {
		t.Fatal("SIGKILL left no container: nothing to reap")
	}
	again := serveDocker(t, addr, cache, "--warm", "2")
	waitLog(again, "warm pool full: env=gridsim sandboxes=2")
	waitContainers(s.id, 2) // the killed server's all reaped; the new pool's two
	if code := again.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if c, n := objects(t, cli, s.id); len(c)+len(n) > 0 {
		t.Fatalf("a full warm pool left %d containers, %d networks after SIGTERM", len(c), len(n))
	}
}
