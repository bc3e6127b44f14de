package hermes

import (
	"github.com/agentenv/agentenv/sdk"
	"github.com/agentenv/agentenv/sdk/builtin"
	"github.com/agentenv/agentenv/sdk/toolformat"
)

// agentenv serves the hermes format built in
// (cmd/agentenv/builtins_hermes.go).
func init() {
	builtin.Register(builtin.Plugin{Kind: sdk.KindToolFormat, Name: Name, Serve: func() { toolformat.Serve(New()) }})
}
