package episode_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/agentenv/agentenv/core/episode"
)

// verify_command's stdout is its score when it is a number; one that is
// not finite (a grader dividing by zero) must leave the episode unscored,
// as verify_tool does, not fall back to the exit code's 1.
func TestVerifyCommandNonFiniteStdout(t *testing.T) {
	for _, tc := range []struct {
		out   string
		score float64 // -1: unscored
	}{
		{"nan", -1}, {"NaN", -1}, {"-inf", -1}, {"1e999", -1},
		{"0.25", 0.25}, {"ok", 1},
	} {
		t.Run(tc.out, func(t *testing.T) {
			cmd := fmt.Sprintf(`{"id": "cmd", "type": "verify_command", "command": ["sh", "-c", "echo %s"]}`, tc.out)
			dir := bundleFiles(t, nil, map[string]string{"tasks/puzzle.json": puzzleTask(5, 2, cmd)})
			r := newRig(t, dir, rigOptions{})
			ep := r.play(episode.Request{TaskID: "puzzle"})
			r.start(ep)
			obs, err := ep.Step(context.Background(), "done")
			if tc.score < 0 {
				if episode.CodeOf(err) != episode.CodeUnscored {
					t.Fatalf("stdout %q: want UNSCORED, got %v, %+v", tc.out, err, obs)
				}
				return
			}
			if err != nil || !obs.Done || obs.Metrics["score/cmd"] != tc.score {
				t.Fatalf("stdout %q: want score %v, got %v, %+v", tc.out, tc.score, err, obs)
			}
		})
	}
}
