// Package reward is the plugin-author API for reward plugins: they combine
// an episode's verifier scores into the one reward the trainer sees.
package reward

import (
	"context"

	"github.com/agentenv/agentenv/sdk"
)

// Combiner combines an episode's scores, keyed by verifier step id, into a
// reward. It returns an error for input it cannot combine (no scores, a
// non-finite score), never a made-up reward.
type Combiner interface {
	Combine(ctx context.Context, scores map[string]float64) (float64, error)
}

// Plugin is what a reward plugin binary serves.
type Plugin interface {
	sdk.Informer
	Combiner
}
