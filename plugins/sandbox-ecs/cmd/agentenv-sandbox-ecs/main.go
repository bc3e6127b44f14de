// Command agentenv-sandbox-ecs is the ECS sandbox plugin binary, for an
// agentenv built without it (-tags no_ecs).
package main

import (
	ecs "github.com/agentenv/agentenv/plugins/sandbox-ecs"
	"github.com/agentenv/agentenv/sdk/sandbox"
)

func main() { sandbox.Serve(ecs.New()) }
