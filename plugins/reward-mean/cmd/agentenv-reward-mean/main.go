// Command agentenv-reward-mean is the mean reward plugin as a standalone
// binary; agentenv also serves it built in.
package main

import (
	mean "github.com/agentenv/agentenv/plugins/reward-mean"
	"github.com/agentenv/agentenv/sdk/reward"
)

func main() { reward.Serve(mean.New()) }
