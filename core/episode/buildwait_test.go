package episode_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentenv/agentenv/core/episode"
)

// While one episode runs an env's long build, another waiting for that
// build must still return when its own context ends or it is closed.
func TestWaitingForBuildHonoursCancel(t *testing.T) {
	dir := bundleFiles(t, nil, map[string]string{"tasks/puzzle.json": puzzleTask(5, 2)})
	env := "command = [\"bin/testenv\"]\nbuild = [\"sh\", \"-c\", \"sleep 20\"]\n"
	if err := os.WriteFile(filepath.Join(dir, "envs/testenv/env.toml"), []byte(env), 0o644); err != nil {
		t.Fatal(err)
	}
	r := newRig(t, dir, rigOptions{})
	builder := r.play(episode.Request{TaskID: "puzzle"})
	built := make(chan error, 1)
	go func() { _, err := builder.Start(context.Background()); built <- err }()
	time.Sleep(300 * time.Millisecond) // the builder holds the build

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
			time.Sleep(200 * time.Millisecond)
			begin := time.Now()
			tc.end(ep, cancel)
			select {
			case err := <-started:
				if err == nil {
					t.Fatal("Start succeeded")
				}
			case <-time.After(5 * time.Second):
				t.Fatal("Start still waits for another episode's build")
			}
			if d := time.Since(begin); d > 3*time.Second {
				t.Fatalf("took %s to return", d)
			}
		})
	}
	_ = builder.Close(context.Background())
	if err := <-built; err == nil {
		t.Fatal("the builder's Start succeeded after Close")
	}
}
