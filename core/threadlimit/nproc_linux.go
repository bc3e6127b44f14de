package threadlimit

import (
	"os"
	"syscall"
)

const rlimitNproc = 0x6 // RLIMIT_NPROC; syscall does not name it

// NprocLimit is the per-user process limit (ulimit -u) when it bounds
// this process (not root, not unlimited), as a Limit of unknown use.
func NprocLimit() (Limit, bool) {
	var rl syscall.Rlimit
	if os.Geteuid() == 0 || syscall.Getrlimit(rlimitNproc, &rl) != nil || rl.Cur == ^uint64(0) || rl.Cur > 1<<40 {
		return Limit{}, false
	}
	return Limit{"ulimit -u", int64(rl.Cur), -1, "ulimit -Hu, or LimitNPROC= in a systemd unit"}, true
}
