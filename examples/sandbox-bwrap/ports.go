package main

import (
	"path/filepath"

	"github.com/agentenv/agentenv/sdk/sandbox/hostenv"
)

// portsDir holds one entry per port handed to a live sandbox, naming the
// sandbox's id: plugin processes sharing the state dir never hand out one
// port twice.
func portsDir(stateDir string) string { return filepath.Join(stateDir, "ports") }

// ports reserves the ports of the sandboxes recorded in stateDir: a
// reservation whose sandbox has no state file any more is stale.
func ports(stateDir string) hostenv.Ports {
	return hostenv.Ports{Dir: portsDir(stateDir), Held: hostenv.HeldWhileExists(func(id string) string {
		return statePath(stateDir, id)
	})}
}
