package cli

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/agentenv/agentenv/sdk"
)

func newVersionCmd(version string) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print agentenv's version",
		Long:  "version prints agentenv's version, the Go release it was built with, and the plugin protocol version it speaks.",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintf(cmd.OutOrStdout(), "agentenv %s (%s %s/%s; plugin protocol %d)\n",
				version, runtime.Version(), runtime.GOOS, runtime.GOARCH, sdk.ProtocolVersion)
		},
	}
}
