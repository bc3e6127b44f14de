package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// oneArg takes exactly one argument, and otherwise says what it is, how
// the command is used and where its flags are: cobra's own "accepts 1
// arg(s), received 0" says none of that.
func oneArg(what, example string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) == 1 {
			return nil
		}
		got := "none"
		if len(args) > 1 {
			got = fmt.Sprintf("%d: %s", len(args), strings.Join(args, " "))
		}
		return fmt.Errorf("%s needs %s, got %s\nusage: %s\n  e.g. %s\nrun '%s --help' for the flags", cmd.Name(), what, got, cmd.UseLine(), example, cmd.CommandPath())
	}
}
