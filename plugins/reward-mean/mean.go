// Package mean is the reward plugin "mean": an episode's reward is the
// arithmetic mean of its verifier scores.
package mean

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/agentenv/agentenv/sdk"
	"github.com/agentenv/agentenv/sdk/reward"
)

// Name is the plugin's name: `--reward mean`.
const Name = "mean"

// Version is the plugin's version, shown by `agentenv plugins list`.
const Version = "1.0.0"

// Mean combines scores by averaging them. It takes no configuration.
type Mean struct{}

var _ reward.Plugin = Mean{}

// New returns the mean reward plugin.
func New() Mean { return Mean{} }

// Info describes the plugin.
func (Mean) Info() sdk.Info {
	return sdk.Info{Name: Name, Kind: sdk.KindReward, Version: Version}
}

// ErrNoScores is returned for an episode with nothing to average.
var ErrNoScores = errors.New("mean: no scores to combine (the task has no verifier, or none ran)")

// Combine returns the mean of scores. No scores, or any NaN or infinite
// score, is an error naming the step: a made-up reward would train the
// model on noise.
func (Mean) Combine(_ context.Context, scores map[string]float64) (float64, error) {
	if len(scores) == 0 {
		return 0, ErrNoScores
	}
	// Sum in step order so the same scores always give the same float.
	steps := make([]string, 0, len(scores))
	for step, s := range scores {
		if math.IsNaN(s) || math.IsInf(s, 0) {
			return 0, fmt.Errorf("mean: score of step %q is %v, not a finite number", step, s)
		}
		steps = append(steps, step)
	}
	sort.Strings(steps)
	var sum float64
	for _, step := range steps {
		sum += scores[step]
	}
	r := sum / float64(len(scores))
	if math.IsInf(r, 0) { // finite scores near MaxFloat64 can overflow the sum
		return 0, fmt.Errorf("mean: the scores' sum overflows (%d scores)", len(scores))
	}
	return r, nil
}
