package sdktest

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/agentenv/agentenv/sdk"
	"github.com/agentenv/agentenv/sdk/reward"
)

// RewardConformance runs the reward conformance suite against p, served
// over real gRPC in-process.
func RewardConformance(t *testing.T, p reward.Plugin) {
	t.Helper()
	c := Reward(t, p)
	runChecks(t, append(infoChecks(c, sdk.KindReward), rewardChecks(c)...))
}

func rewardChecks(c reward.Combiner) []check {
	combine := func(ctx context.Context, scores map[string]float64) (float64, error) {
		r, err := c.Combine(ctx, scores)
		if err == nil && (math.IsNaN(r) || math.IsInf(r, 0)) {
			return r, fmt.Errorf("Combine(%v) = %v, a non-finite reward", scores, r)
		}
		return r, err
	}
	return []check{
		{"combines", func(ctx context.Context) error {
			for _, scores := range []map[string]float64{
				{"grade": 1}, {"grade": 0}, {"a": 0.25, "b": 0.75}, {"a": -1, "b": 2, "c": 0.5},
			} {
				if _, err := combine(ctx, scores); err != nil {
					return fmt.Errorf("Combine(%v): %w", scores, err)
				}
			}
			return nil
		}},
		{"deterministic", func(ctx context.Context) error {
			scores := map[string]float64{"a": 0.1, "b": 0.7, "c": 0.3, "d": 1}
			first, err := combine(ctx, scores)
			if err != nil {
				return err
			}
			for i := 0; i < 20; i++ {
				r, err := combine(ctx, scores)
				if err != nil {
					return err
				}
				if r != first {
					return fmt.Errorf("Combine(%v) gave %v, then %v", scores, first, r)
				}
			}
			return nil
		}},
		{"many scores", func(ctx context.Context) error {
			scores := make(map[string]float64, 1000)
			for i := 0; i < 1000; i++ {
				scores[fmt.Sprintf("step-%d", i)] = float64(i%10) / 10
			}
			_, err := combine(ctx, scores)
			return err
		}},
		{"refuses no scores", func(ctx context.Context) error {
			if r, err := c.Combine(ctx, map[string]float64{}); err == nil {
				return fmt.Errorf("Combine of no scores gave %v, want an error", r)
			}
			return nil
		}},
		{"refuses non-finite scores", func(ctx context.Context) error {
			for _, bad := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
				scores := map[string]float64{"ok": 1, "bad": bad}
				if r, err := c.Combine(ctx, scores); err == nil {
					return fmt.Errorf("Combine with score %v gave %v, want an error", bad, r)
				}
			}
			return nil
		}},
	}
}
