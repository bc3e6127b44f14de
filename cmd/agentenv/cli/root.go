// Package cli is agentenv's command line as a library: NewRootCmd builds
// the whole command tree, Main runs it. The agentenv binary is a main
// package of a few lines that calls Main, plus one file per built-in
// plugin that links it into sdk/builtin's registry; a team that wants
// "agentenv plus our sandbox" as one binary writes the same main package
// with one more blank import (docs/plugins.md). Nothing here registers
// itself at init time, and no command is global: each NewRootCmd returns
// a fresh tree, so tests can run commands in process.
package cli

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

// NewRootCmd returns agentenv's root command with every subcommand;
// version is what `agentenv version` prints and /info reports.
func NewRootCmd(version string) *cobra.Command {
	root := &cobra.Command{
		Use:           "agentenv",
		Short:         "Serve agent tasks to RL trainers as OpenEnv environments",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(
		newServeCmd(version),
		newEvalCmd(),
		newPlayCmd(),
		newBundleCmd(),
		newHarborCmd(),
		newSkyrlCmd(),
		newPluginsCmd(),
		newSandboxesCmd(),
		newTranscriptsCmd(),
		newVersionCmd(version),
		newPluginServeCmd(),
	)
	// Subcommands inherit it: an unknown flag gets the nearest ones.
	root.SetFlagErrorFunc(flagError)
	return root
}

// Main runs agentenv with the process's arguments and exits: status 1
// with the error on stderr when a command fails. The plugins it can serve
// as built-ins are those linked into the binary (sdk/builtin).
func Main(version string) {
	if err := NewRootCmd(version).Execute(); err != nil {
		var ee *exitError
		if errors.As(err, &ee) {
			if ee.err != nil {
				fmt.Fprintln(os.Stderr, "agentenv:", ee.err)
			}
			os.Exit(ee.code)
		}
		fmt.Fprintln(os.Stderr, "agentenv:", err)
		os.Exit(1)
	}
}
