// Command agentenv-sandbox-k8s is the Kubernetes sandbox plugin binary, for
// an agentenv built without it (-tags no_k8s).
package main

import (
	k8s "github.com/agentenv/agentenv/plugins/sandbox-k8s"
	"github.com/agentenv/agentenv/sdk/sandbox"
)

func main() { sandbox.Serve(k8s.New()) }
