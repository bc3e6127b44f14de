package local

import (
	"github.com/agentenv/agentenv/sdk"
	"github.com/agentenv/agentenv/sdk/builtin"
	"github.com/agentenv/agentenv/sdk/sandbox"
)

// agentenv serves the local sandbox built in
// (cmd/agentenv/builtins_local.go). The name must match Info's.
func init() {
	builtin.Register(builtin.Plugin{Kind: sdk.KindSandbox, Name: "local", Serve: func() { sandbox.Serve(New()) }})
}
