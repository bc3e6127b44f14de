package runtime

import (
	"context"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentenv/agentenv/sdk/sdktest/wait"

	"github.com/agentenv/agentenv/core/episode"
	"github.com/agentenv/agentenv/core/testenv/testenvbuild"
)

// The sandbox plugin is killed while eight deploys wait in it for their
// envs to listen. Every deploy goes again on the restarted plugin and its
// episode starts; what the killed process had started is reaped, so once
// the episodes close no env is left.
func TestDeploysInFlightSurviveASandboxPluginCrash(t *testing.T) {
	const n = 8
	rt := openRuntime(t, `env = { TESTENV_START_DELAY = "3s" }`)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	eps := make([]episode.Episode, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		ep, err := rt.Engine.Play(episode.Request{TaskID: "puzzle"})
		if err != nil {
			t.Fatal(err)
		}
		eps[i] = ep
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = ep.Start(ctx)
		}()
	}
	// Every deploy is in the plugin, its env started but not listening.
	wait.Until(t, "eight envs started", func() bool { return len(testenvbuild.Procs(testenvBin)) == n })
	before := sandboxPIDs(t, rt)
	if len(before) != 1 {
		t.Fatalf("sandbox plugin processes %v, want one", before)
	}
	if err := syscall.Kill(before[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	failed := 0
	for i, err := range errs {
		if err != nil {
			failed++
			t.Errorf("episode %d failed to start: %v", i, err)
		}
	}
	if failed > 0 {
		t.Fatalf("%d of %d deploys in flight failed with the plugin's crash", failed, n)
	}
	for _, ep := range eps {
		if err := ep.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	}
	if err := rt.Engine.Idle(ctx); err != nil {
		t.Fatal(err)
	}
	if left := testenvbuild.Procs(testenvBin); len(left) > 0 {
		t.Fatalf("env processes %v left behind (the killed plugin's first tries)", left)
	}
}
