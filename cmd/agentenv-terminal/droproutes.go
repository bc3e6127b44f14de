package main

import (
	"fmt"
	"io"
)

// dropRoutesArg, as the only argument, makes the binary take the default
// routes out of the network namespace it runs in, instead of serving: a
// sandbox that must keep an env off the internet, where its container
// engine gives every container a default route (Docker's bridge networks
// do, even `internal` ones on Engine 20.10), runs it once in a helper that
// joins the env's namespace with CAP_NET_ADMIN (plugins/sandbox-local,
// docs/sandboxes.md "No internet"). Sandboxes pass this string as is.
const dropRoutesArg = "drop-default-routes"

// dropRoutes drops the namespace's default routes, says what it did on out
// and returns the process's exit status (0 when none is left).
func dropRoutes(out io.Writer) int {
	n, err := dropDefaultRoutes()
	if err != nil {
		fmt.Fprintf(out, "%s: %v\n", dropRoutesArg, err)
		return 1
	}
	fmt.Fprintf(out, "%s: removed %d default route(s); none is left\n", dropRoutesArg, n)
	return 0
}
