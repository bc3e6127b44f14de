package qwen3coder

import (
	"github.com/agentenv/agentenv/sdk"
	"github.com/agentenv/agentenv/sdk/builtin"
	"github.com/agentenv/agentenv/sdk/toolformat"
)

// agentenv serves the qwen3_coder format built in
// (cmd/agentenv/builtins_qwen3_coder.go).
func init() {
	builtin.Register(builtin.Plugin{Kind: sdk.KindToolFormat, Name: Name, Serve: func() { toolformat.Serve(New()) }})
}
