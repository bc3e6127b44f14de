package k8s

import (
	"github.com/agentenv/agentenv/sdk"
	"github.com/agentenv/agentenv/sdk/builtin"
	"github.com/agentenv/agentenv/sdk/sandbox"
)

// agentenv serves the Kubernetes sandbox built in (cmd/agentenv/builtins_k8s.go).
func init() {
	builtin.Register(builtin.Plugin{Kind: sdk.KindSandbox, Name: Name, Serve: func() { sandbox.Serve(New()) }})
}
