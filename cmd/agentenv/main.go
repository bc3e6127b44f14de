// Command agentenv serves agent tasks to RL trainers as OpenEnv
// environments. Its commands live in package cli; this package adds the
// built-in plugins, one builtins_<name>.go file each (builtins.go).
package main

import "github.com/agentenv/agentenv/cmd/agentenv/cli"

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0-dev"

func main() { cli.Main(version) }
