package ecs

import (
	"github.com/agentenv/agentenv/sdk"
	"github.com/agentenv/agentenv/sdk/builtin"
	"github.com/agentenv/agentenv/sdk/sandbox"
)

// agentenv serves the ECS sandbox built in (cmd/agentenv/builtins_ecs.go).
func init() {
	builtin.Register(builtin.Plugin{Kind: sdk.KindSandbox, Name: Name, Serve: func() { sandbox.Serve(New()) }})
}
