package main

import (
	"path/filepath"
	"testing"

	"github.com/agentenv/agentenv/sdk/sdktest"
)

// An env flooding its output keeps its env.log under log_max_mb while it
// writes, and the log keeps its end.
func TestEnvLogIsCapped(t *testing.T) {
	needBwrap(t)
	dir := stateDir(t)
	p := newTestPlugin(t, dir, map[string]any{"log_max_mb": 1})
	spec := testSpec()
	spec.Command = []string{"sh", "-c", sdktest.FloodCommand + " testenv", filepath.Join(envDir, "bin", "testenv")}
	sb := deploy(t, p, spec)
	path := filepath.Join(sandboxRoot(dir, sb.ID), "env.log")
	sdktest.WaitLogCapped(t, path)
}
