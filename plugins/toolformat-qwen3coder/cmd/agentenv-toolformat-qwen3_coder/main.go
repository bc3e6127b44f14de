// Command agentenv-toolformat-qwen3_coder serves the qwen3_coder tool-call
// format as an agentenv plugin.
package main

import (
	qwen3coder "github.com/agentenv/agentenv/plugins/toolformat-qwen3coder"
	"github.com/agentenv/agentenv/sdk/toolformat"
)

func main() { toolformat.Serve(qwen3coder.New()) }
