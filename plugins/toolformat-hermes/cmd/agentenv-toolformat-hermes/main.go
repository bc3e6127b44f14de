// Command agentenv-toolformat-hermes serves the hermes tool-call format as
// an agentenv plugin.
package main

import (
	hermes "github.com/agentenv/agentenv/plugins/toolformat-hermes"
	"github.com/agentenv/agentenv/sdk/toolformat"
)

func main() { toolformat.Serve(hermes.New()) }
