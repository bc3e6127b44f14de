// Command agentenv-reward-weighted is a reward plugin: the weighted mean
// of an episode's scores, with weights per verifier step from its config.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/agentenv/agentenv/sdk"
	"github.com/agentenv/agentenv/sdk/reward"
)

// config is what the host validates against Info().ConfigSchema and then
// hands to Configure.
type config struct {
	Weights map[string]float64 `json:"weights"` // by step id, e.g. "score/grade"
	Default float64            `json:"default"` // weight of steps not listed
}

type weighted struct{ cfg config }

func (w *weighted) Info() sdk.Info {
	return sdk.Info{
		Name:    "weighted", // the binary is agentenv-reward-weighted
		Kind:    sdk.KindReward,
		Version: "1.0.0",
		ConfigSchema: json.RawMessage(`{
			"type": "object",
			"properties": {
				"weights": {"type": "object", "additionalProperties": {"type": "number", "minimum": 0}},
				"default": {"type": "number", "minimum": 0}
			},
			"additionalProperties": false
		}`),
	}
}

func (w *weighted) Configure(_ context.Context, raw json.RawMessage) error {
	c := config{Default: 1}
	if err := json.Unmarshal(raw, &c); err != nil {
		return err
	}
	w.cfg = c
	return nil
}

func (w *weighted) Combine(_ context.Context, scores map[string]float64) (float64, error) {
	// Add in step order: the same scores must always give the same reward.
	steps := make([]string, 0, len(scores))
	for step := range scores {
		steps = append(steps, step)
	}
	sort.Strings(steps)
	var sum, total float64
	for _, step := range steps {
		s := scores[step]
		if math.IsNaN(s) || math.IsInf(s, 0) {
			return 0, fmt.Errorf("score of step %q is %v", step, s)
		}
		weight, ok := w.cfg.Weights[step]
		if !ok {
			weight = w.cfg.Default
		}
		sum += weight * s
		total += weight
	}
	if total == 0 {
		return 0, errors.New("no scores with a non-zero weight")
	}
	return sum / total, nil
}

func main() { reward.Serve(&weighted{cfg: config{Default: 1}}) }
