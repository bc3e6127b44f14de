// Package lowest is our reward plugin "lowest": an episode is worth its
// worst score. Its init links it into any agentenv binary that imports it.
package lowest

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/agentenv/agentenv/sdk"
	"github.com/agentenv/agentenv/sdk/builtin"
	"github.com/agentenv/agentenv/sdk/reward"
)

func init() {
	builtin.Register(builtin.Plugin{Kind: sdk.KindReward, Name: "lowest", Serve: func() { reward.Serve(lowest{}) }})
}

type lowest struct{}

func (lowest) Info() sdk.Info {
	return sdk.Info{Name: "lowest", Kind: sdk.KindReward, Version: "1.0.0"}
}

func (lowest) Combine(_ context.Context, scores map[string]float64) (float64, error) {
	if len(scores) == 0 {
		return 0, errors.New("lowest: no scores")
	}
	low := math.Inf(1)
	for step, s := range scores {
		if math.IsNaN(s) || math.IsInf(s, 0) {
			return 0, fmt.Errorf("lowest: score of step %q is %v", step, s)
		}
		low = math.Min(low, s)
	}
	return low, nil
}
