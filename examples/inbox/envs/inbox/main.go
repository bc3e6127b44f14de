// Command inbox-env serves the inbox example's env: an MCP streamable-HTTP
// server at /mcp on 127.0.0.1:$AGENTENV_PORT (18765 without it), over the
// mailbox built into it. In a container, run it with --host 0.0.0.0 so the
// published port reaches it.
//
// The bundle builds it statically (CGO_ENABLED=0) into bin/inbox-env, which
// both the process sandbox and the FROM-scratch image run.
package main

import (
	"net/http"

	"github.com/hashicorp/go-hclog"

	"github.com/agentenv/agentenv/examples/inbox/inboxenv"
	"github.com/agentenv/agentenv/examples/inbox/mailbox"
	"github.com/agentenv/agentenv/internal/envserve"
)

func main() {
	envserve.Main("inbox-env", func(log hclog.Logger) (http.Handler, error) {
		box, err := mailbox.Committed()
		if err != nil {
			return nil, err
		}
		log.Info("mailbox loaded", "emails", len(box.Emails))
		return inboxenv.New(box, log).Handler(), nil
	})
}
