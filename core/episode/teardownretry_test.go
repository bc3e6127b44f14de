package episode_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentenv/agentenv/core/episode"
)

// A teardown whose Terminate fails (the sandbox plugin crashed and is
// being restarted) is retried in the background until it succeeds: the env
// goes without a server restart, and Close reports no error.
func TestFailedTeardownIsRetried(t *testing.T) {
	r := newRig(t, bundleFiles(t, nil, map[string]string{"tasks/puzzle.json": puzzleTask(5, 2)}), rigOptions{})
	ep, err := r.engine.Play(episode.Request{TaskID: "puzzle"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := ep.Start(ctx); err != nil {
		t.Fatal(err)
	}
	r.driver.failTerminates.Store(2)
	if err := ep.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if got := r.driver.terminates.Load(); got != 3 {
		t.Fatalf("Terminate called %d times, want 3 (two failures, then the one that worked)", got)
	}
	assertGone(t, r)
}
