// Package atomicfile writes whole files so that no reader, and no crash,
// ever sees half of one: the data goes to a temp file beside the target,
// synced, then renamed over it. agentenv's state files, caches and
// outputs are written through it, and plugins may use it too.
package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"
)

// Write writes data to path with mode perm, through a temp file in the
// same folder and a rename: path holds the old content or the new, never
// a part. The folder must exist (a missing one is an error naming path,
// not a folder made from a typo). The temp file's name starts with a dot
// and ends in .tmp, so a program listing the folder can skip it; on error
// it is removed.
func Write(path string, data []byte, perm os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Chmod(perm)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
