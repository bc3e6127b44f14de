// Command echoreward is a reward plugin for the SDK's own tests: the mean
// of the scores, refusing none and non-finite ones.
package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/agentenv/agentenv/sdk"
	"github.com/agentenv/agentenv/sdk/reward"
)

type mean struct{}

func (mean) Info() sdk.Info {
	return sdk.Info{Name: "echo", Kind: sdk.KindReward, Version: "1.2.3"}
}

func (mean) Combine(_ context.Context, scores map[string]float64) (float64, error) {
	if len(scores) == 0 {
		return 0, errors.New("no scores to combine")
	}
	sum := 0.0
	for _, step := range slices.Sorted(maps.Keys(scores)) {
		s := scores[step]
		if math.IsNaN(s) || math.IsInf(s, 0) {
			return 0, fmt.Errorf("score %s is %v", step, s)
		}
		sum += s
	}
	return sum / float64(len(scores)), nil
}

func main() { reward.Serve(mean{}) }
