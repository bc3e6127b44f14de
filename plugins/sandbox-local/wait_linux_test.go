package local

import (
	"os/exec"
	"syscall"
	"testing"
)

// waitExit reaps through the env's pidfd and describes the exit as
// cmd.Wait would.
func TestWaitExitDescribesTheExit(t *testing.T) {
	for _, tc := range []struct {
		script, want string
	}{
		{"exit 0", ""},
		{"exit 3", "exit status 3"},
		{"kill -9 $$", "signal: killed"},
	} {
		cmd := exec.Command("sh", "-c", tc.script)
		cmd.SysProcAttr = &syscall.SysProcAttr{}
		pidfd := withPidfd(cmd.SysProcAttr)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if *pidfd < 0 {
			t.Fatalf("%q: no pidfd", tc.script)
		}
		err := waitExit(cmd, *pidfd)
		if got := errText(err); got != tc.want {
			t.Errorf("%q: waitExit = %q, want %q", tc.script, got, tc.want)
		}
		// Reaped: the pid is no child of ours any more.
		if _, err := syscall.Wait4(cmd.Process.Pid, nil, syscall.WNOHANG, nil); err != syscall.ECHILD {
			t.Errorf("%q: after waitExit, wait4 = %v, want ECHILD", tc.script, err)
		}
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
