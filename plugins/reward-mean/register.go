package mean

import (
	"github.com/agentenv/agentenv/sdk"
	"github.com/agentenv/agentenv/sdk/builtin"
	"github.com/agentenv/agentenv/sdk/reward"
)

// agentenv serves the mean reward built in (cmd/agentenv/builtins_mean.go).
func init() {
	builtin.Register(builtin.Plugin{Kind: sdk.KindReward, Name: Name, Serve: func() { reward.Serve(New()) }})
}
