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
	"io"
	"os"

	"github.com/hashicorp/go-hclog"
	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"
)

// Env is what commands take from the process besides their arguments and
// standard streams (those are the command's own: cobra's SetIn, SetOut
// and SetErr, the process's unless set): its environment variables. A
// test gives its own, so it sets nothing process-wide and can run in
// parallel with others.
type Env struct {
	// Getenv looks up a variable: the token --token-var names, the model
	// API key, AGENTENV_LOG_LEVEL.
	Getenv func(key string) string
}

// ProcessEnv is the process's own environment.
func ProcessEnv() Env { return Env{Getenv: os.Getenv} }

// NewRootCmd returns agentenv's root command with every subcommand;
// version is what `agentenv version` prints and /info reports. Commands
// read the process's environment (NewRootCmdEnv for another).
func NewRootCmd(version string) *cobra.Command { return NewRootCmdEnv(version, ProcessEnv()) }

// NewRootCmdEnv is NewRootCmd with commands that read env instead of the
// process's environment.
func NewRootCmdEnv(version string, env Env) *cobra.Command {
	root := &cobra.Command{
		Use:           "agentenv",
		Short:         "Serve agent tasks to RL trainers as OpenEnv environments",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(
		newServeCmd(version, env),
		newEvalCmd(env),
		newPlayCmd(env),
		newBundleCmd(),
		newHarborCmd(env),
		newSkyrlCmd(env),
		newPluginsCmd(env),
		newSandboxesCmd(env),
		newTranscriptsCmd(),
		newVersionCmd(version),
		newPluginServeCmd(),
	)
	// Subcommands inherit it: an unknown flag gets the nearest ones.
	root.SetFlagErrorFunc(flagError)
	return root
}

// logger is the logger of short-lived commands: their stderr, level from
// $AGENTENV_LOG_LEVEL (def if unset).
func (e Env) logger(cmd *cobra.Command, def hclog.Level) hclog.Logger {
	level := def
	if l := hclog.LevelFromString(e.Getenv(logLevelEnv)); l != hclog.NoLevel {
		level = l
	}
	return hclog.New(&hclog.LoggerOptions{Name: "agentenv", Output: cmd.ErrOrStderr(), Level: level})
}

// isTerminal says whether w is a terminal (for colour).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && isatty.IsTerminal(f.Fd())
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
