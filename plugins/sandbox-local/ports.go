package local

import (
	"path/filepath"

	"github.com/agentenv/agentenv/sdk/sandbox/hostenv"
)

// portsDir holds one entry per port handed to a live sandbox, named after
// the port and naming the sandbox's id: a reservation every local plugin
// process sharing the state dir sees.
func portsDir(stateDir string) string { return filepath.Join(stateDir, "ports") }

// ports reserves the ports of the sandboxes recorded in stateDir: a
// reservation whose sandbox has no state file any more is stale. Released
// reservations are kept as spares for the next ones.
func (p *Plugin) ports(stateDir string) hostenv.Ports {
	return hostenv.Ports{Dir: portsDir(stateDir), Spares: &p.sparePorts, Held: hostenv.HeldWhileExists(func(id string) string {
		return statePath(stateDir, id)
	})}
}
