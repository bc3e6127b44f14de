//go:build unix

package bundle

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time this process has used: on a shared machine it
// says what a load costs better than the wall clock does.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
