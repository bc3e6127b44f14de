// Command agentenv is agentenv with our own plugin built in: agentenv's
// command line, the first-party plugins we use, and ours, in one binary.
package main

import (
	"github.com/agentenv/agentenv/cmd/agentenv/cli"

	// The first-party plugins to serve built in (agentenv's own
	// cmd/agentenv/builtins_*.go files list them all).
	_ "github.com/agentenv/agentenv/plugins/reward-mean"
	_ "github.com/agentenv/agentenv/plugins/sandbox-local"
	_ "github.com/agentenv/agentenv/plugins/toolformat-hermes"

	// Ours: its package registers it with sdk/builtin.
	_ "example.com/our-agentenv/lowest"
)

var version = "1.0.0-ours"

func main() { cli.Main(version) }
