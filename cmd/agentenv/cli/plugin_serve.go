package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agentenv/agentenv/sdk/builtin"
)

func newPluginServeCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "plugin-serve KIND-NAME",
		Short:  "Serve a built-in plugin over go-plugin (run by agentenv itself, not by hand)",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			p, ok := builtin.Lookup(args[0])
			if !ok {
				return fmt.Errorf("plugin-serve: no built-in plugin %q (built in: %s)", args[0], strings.Join(builtin.IDs(), ", "))
			}
			p.Serve() // does not return
			return nil
		},
	}
}
