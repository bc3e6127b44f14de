// Package noroute removes the default routes of the network namespace it
// runs in, so nothing in it can reach past its own subnets. Sandboxes use it
// for Spec.NoInternet where the container engine cannot leave the route out
// (Docker 20.10's bridge networks always give containers one): the injected
// terminal binary is exec'd in the container with extra privileges as
// `agentenv-terminal drop-default-routes` (Arg), which calls Main.
package noroute

import (
	"fmt"
	"io"
)

// Arg is the argument an injected binary is run with to drop the routes.
const Arg = "drop-default-routes"

// Main drops the namespace's default routes, prints what it removed to out
// and returns the process's exit status (0 when none is left).
func Main(out io.Writer) int {
	n, err := DropDefaultRoutes()
	if err != nil {
		fmt.Fprintf(out, "%s: %v\n", Arg, err)
		return 1
	}
	fmt.Fprintf(out, "%s: removed %d default route(s); none is left\n", Arg, n)
	return 0
}
