// Command gridsim-env serves GridSim's env: an MCP streamable-HTTP server
// at /mcp on 127.0.0.1:$AGENTENV_PORT (18765 without it). In a container,
// run it with --host 0.0.0.0 so the published port reaches it.
//
// The bundle builds it statically (CGO_ENABLED=0) into bin/gridsim-env, which
// both the process sandbox and the FROM-scratch image run.
package main

import (
	"net/http"
	"os"

	"github.com/hashicorp/go-hclog"

	"github.com/agentenv/agentenv/examples/gridsim/gridenv"
	"github.com/agentenv/agentenv/internal/envserve"
)

func main() {
	envserve.Main("gridsim-env", func(log hclog.Logger) (http.Handler, error) {
		env := gridenv.New(log)
		// Set by agentenv when env.toml declares reuse = N: serve the reset.
		env.ResetTool = os.Getenv(envserve.ResetToolEnv)
		return env.Handler(), nil
	})
}
