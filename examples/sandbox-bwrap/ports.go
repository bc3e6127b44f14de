package main

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/agentenv/agentenv/sdk/sandbox/hostenv"
)

// portsDir holds one file per port handed to a live sandbox, holding the
// sandbox's id: plugin processes sharing the state dir never hand out one
// port twice.
func portsDir(stateDir string) string { return filepath.Join(stateDir, "ports") }

// ports reserves the ports of the sandboxes recorded in stateDir. A
// reservation whose sandbox has no state file any more is stale.
func ports(stateDir string) hostenv.Ports {
	return hostenv.Ports{Dir: portsDir(stateDir), Held: func(id string) bool {
		_, err := os.Stat(statePath(stateDir, id))
		return !errors.Is(err, fs.ErrNotExist)
	}}
}
