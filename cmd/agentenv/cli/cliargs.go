package cli

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// oneArg takes exactly one argument, and otherwise says what it is, how
// the command is used and where its flags are: cobra's own "accepts 1
// arg(s), received 0" says none of that.
func oneArg(what, example string) cobra.PositionalArgs { return nArgs(1, what, example) }

// nArgs takes exactly n arguments (what names them), with oneArg's error
// otherwise: the usage line and an example.
func nArgs(n int, what, example string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) == n {
			return nil
		}
		got := "none"
		if len(args) > 0 {
			got = fmt.Sprintf("%d: %s", len(args), strings.Join(args, " "))
		}
		return fmt.Errorf("%s needs %s, got %s\nusage: %s\n  e.g. %s\nrun '%s --help' for the flags", cmd.Name(), what, got, cmd.UseLine(), example, cmd.CommandPath())
	}
}

// markRequired marks flags required, and says so in --help, which cobra
// does not.
func markRequired(cmd *cobra.Command, names ...string) {
	for _, name := range names {
		f := cmd.Flags().Lookup(name)
		if f == nil {
			panic("markRequired: no flag --" + name)
		}
		f.Usage += " (required)"
		if err := cmd.MarkFlagRequired(name); err != nil {
			panic(err)
		}
	}
}

// waitingNote returns what tells the user, on w, that the server still
// builds its envs: each new message, and the same one every 10 s.
func waitingNote(w io.Writer) func(msg string) {
	var last string
	var at time.Time
	return func(msg string) {
		if msg == last && time.Since(at) < 10*time.Second {
			return
		}
		last, at = msg, time.Now()
		fmt.Fprintf(w, "waiting for the server: %s\n", msg)
	}
}
