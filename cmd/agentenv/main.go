// Command agentenv serves agent tasks to RL trainers as OpenEnv
// environments. Each subcommand lives in its own file and registers itself
// on the root command in an init function.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0-dev"

var rootCmd = &cobra.Command{
	Use:           "agentenv",
	Short:         "Serve agent tasks to RL trainers as OpenEnv environments",
	SilenceUsage:  true,
	SilenceErrors: true,
}

func main() {
	if err := rootCmd.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "agentenv:", err)
		os.Exit(1)
	}
}
