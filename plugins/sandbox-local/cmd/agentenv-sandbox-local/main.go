// Command agentenv-sandbox-local is the local sandbox plugin binary.
package main

import (
	local "github.com/agentenv/agentenv/plugins/sandbox-local"
	"github.com/agentenv/agentenv/sdk/sandbox"
)

func main() { sandbox.Serve(local.New()) }
