//go:build unix

package runtime

import (
	"os"
	"syscall"
)

// lockShared takes a shared lock on f, waiting while a releaser holds it
// exclusively (a moment).
func lockShared(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH)
		if err != syscall.EINTR {
			return err
		}
	}
}

// tryLockExclusive takes (or upgrades to) an exclusive lock on f if no one
// else holds one.
func tryLockExclusive(f *os.File) bool {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil
}
