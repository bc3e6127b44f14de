package hostenv

import "golang.org/x/sys/unix"

// RenameNoReplace renames oldpath to newpath, failing with fs.ErrExist
// where newpath is there (renameat2(2), RENAME_NOREPLACE): an exclusive
// create for a file made ahead. Elsewhere, and on file systems without
// it, it fails with another error.
func RenameNoReplace(oldpath, newpath string) error {
	return unix.Renameat2(unix.AT_FDCWD, oldpath, unix.AT_FDCWD, newpath, unix.RENAME_NOREPLACE)
}
