package hostenv

import (
	"os"
	"syscall"
)

// fallocCollapseRange is Linux's FALLOC_FL_COLLAPSE_RANGE.
const fallocCollapseRange = 0x8

// collapseHead removes the file's first n bytes in place, n rounded down
// to the filesystem's block size, and returns how many went. The kernel
// does it under the inode's lock, so an env appending meanwhile loses
// nothing: its writes land at the new end. ok is false where the
// filesystem cannot (tmpfs, overlay, ...).
func collapseHead(f *os.File, n int64) (int64, bool) {
	info, err := f.Stat()
	if err != nil {
		return 0, false
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok || st.Blksize <= 0 {
		return 0, false
	}
	n = n / int64(st.Blksize) * int64(st.Blksize)
	if n <= 0 {
		return 0, false
	}
	if err := syscall.Fallocate(int(f.Fd()), fallocCollapseRange, 0, n); err != nil {
		return 0, false
	}
	return n, true
}

// lockLog takes f's advisory lock without waiting: several plugin
// processes may watch the same logs, and two cuts of one log at once
// would each act on what the other already changed. The env's own writes
// take no lock and go on.
func lockLog(f *os.File) (unlock func(), ok bool) {
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return nil, false
	}
	return func() { syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }, true
}
