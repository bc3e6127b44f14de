package hostenv

import "syscall"

// lockDir takes dir's advisory lock, waiting for it: plugin processes
// sharing a folder of reservations take over a stale one under it.
func lockDir(dir string) (unlock func(), err error) {
	fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(fd, syscall.LOCK_EX); err != nil {
		syscall.Close(fd)
		return nil, err
	}
	return func() { syscall.Close(fd) }, nil // closing drops the lock
}
