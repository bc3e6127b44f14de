package episode_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentenv/agentenv/sdk/sdktest/wait"

	"github.com/agentenv/agentenv/core/episode"
)

// While one episode runs an env's long build, another waiting for that
// build must still return when its own context ends or it is closed.
func TestWaitingForBuildHonoursCancel(t *testing.T) {
	dir := bundleFiles(t, nil, map[string]string{"tasks/puzzle.json": puzzleTask(5, 2)})
	// The build says it began (a file), then takes longer than any wait here.
	began := filepath.Join(t.TempDir(), "began")
	env := fmt.Sprintf("command = [\"bin/testenv\"]\nbuild = [\"sh\", \"-c\", \"touch %s; exec sleep 120\"]\n", began)
	if err := os.WriteFile(filepath.Join(dir, "envs/testenv/env.toml"), []byte(env), 0o644); err != nil {
		t.Fatal(err)
	}
	r := newRig(t, dir, rigOptions{})
	builder := r.play(episode.Request{TaskID: "puzzle"})
	built := make(chan error, 1)
	go func() { _, err := builder.Start(context.Background()); built <- err }()
	// The builder holds the build.
	wait.For(t, "the build to begin", func() error { _, err := os.Stat(began); return err })

	for _, tc := range []struct {
		name string
		end  func(ep episode.Episode, cancel context.CancelFunc)
	}{
		{"its context ends", func(_ episode.Episode, cancel context.CancelFunc) { cancel() }},
		{"it is closed", func(ep episode.Episode, _ context.CancelFunc) { _ = ep.Close(context.Background()) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ep := r.play(episode.Request{TaskID: "puzzle"})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			started := make(chan error, 1)
			go func() { _, err := ep.Start(ctx); started <- err }()
			// Room for Start to reach the wait on the build. No event says
			// it did; one that has not yet returns the same error, so a
			// slow machine makes the test weaker, never wrong.
			time.Sleep(200 * time.Millisecond)
			tc.end(ep, cancel)
			select {
			case err := <-started:
				if err == nil {
					t.Fatal("Start succeeded")
				}
			case <-time.After(60 * time.Second): // the build takes 120 s
				t.Fatal("Start still waits for another episode's build")
			}
		})
	}
	_ = builder.Close(context.Background())
	if err := <-built; err == nil {
		t.Fatal("the builder's Start succeeded after Close")
	}
}
