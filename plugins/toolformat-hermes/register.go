package hermes

import (
	"github.com/agentenv/agentenv/sdk"
	"github.com/agentenv/agentenv/sdk/builtin"
	"github.com/agentenv/agentenv/sdk/toolformat"
)

// agentenv links the hermes format built in (cmd/agentenv/builtins_hermes.go): it
// runs in the server's process (New), or as `agentenv plugin-serve`
// when the host isolates its tool formats (Serve).
func init() {
	builtin.Register(builtin.Plugin{Kind: sdk.KindToolFormat, Name: Name, Serve: func() { toolformat.Serve(New()) },
		New: func() sdk.Informer { return New() }})
}
