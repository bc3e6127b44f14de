//go:build unix && !linux

package pluginhost

import (
	"os/exec"
	"syscall"
)

// setProcAttr puts the plugin in its own process group. Outside Linux there
// is no parent-death signal: plugins of a host killed by SIGKILL linger.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}
