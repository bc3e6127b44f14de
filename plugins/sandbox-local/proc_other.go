//go:build !linux

package local

import (
	"os/exec"
	"syscall"
)

// procStart is unknown without /proc; sandboxes are then told apart by
// their process group alone.
func procStart(int) (uint64, bool) { return 0, false }

// groupMembers reports the group as live while any member (zombies
// included) can be signalled.
func groupMembers(pgid int) []int {
	if err := syscall.Kill(-pgid, 0); err == nil || err == syscall.EPERM {
		return []int{pgid}
	}
	return nil
}

// procScan is false: without /proc no env is found by its environment,
// so a deploy records its env's pid in a second write of its state file.
const procScan = false

// findByIDs cannot look into other processes' environments without /proc.
func findByIDs(string, map[string]bool) map[string]int { return nil }

// procStat is unknown without /proc.
func procStat(int) ([][]byte, bool) { return nil, false }

// withPidfd gives no pidfd here: waitExit is cmd.Wait.
func withPidfd(*syscall.SysProcAttr) *int { fd := -1; return &fd }

// waitExit reaps the env's leader: cmd.Wait.
func waitExit(cmd *exec.Cmd, _ int) error { return cmd.Wait() }

// truncateUnheld cannot tell here: spares are off without /proc.
func truncateUnheld(string) bool { return false }
