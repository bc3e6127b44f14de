package episode_test

import (
	"context"
	"strings"
	"testing"

	"github.com/agentenv/agentenv/core/episode"
)

// An episode_id may have 255 characters, as the protocol and /schema say;
// 256 is refused.
func TestEpisodeIDUpTo255(t *testing.T) {
	dir := bundleFiles(t, nil, map[string]string{"tasks/puzzle.json": puzzleTask(5, 2)})
	r := newRig(t, dir, rigOptions{})
	long := strings.Repeat("e", 255)
	ep, err := r.engine.Play(episode.Request{TaskID: "puzzle", EpisodeID: long})
	if err != nil {
		t.Fatalf("a 255-character episode_id: %v", err)
	}
	if err := ep.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	_, err = r.engine.Play(episode.Request{TaskID: "puzzle", EpisodeID: long + "e"})
	if episode.CodeOf(err) != episode.CodeValidation || !strings.Contains(err.Error(), "at most 255") {
		t.Fatalf("a 256-character episode_id: %v", err)
	}
}
