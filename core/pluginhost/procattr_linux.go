package pluginhost

import (
	"os/exec"
	"syscall"
)

// setProcAttr makes the kernel kill the plugin when the host dies, even by
// SIGKILL, and puts it in its own process group so a kill takes anything
// it started with it.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
}
