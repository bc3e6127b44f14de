package hostenv

import (
	"fmt"
	"os"
	"path/filepath"
)

// WriteFileAtomic writes data to path (0600) through a temp file in the
// same folder and a rename, so no reader ever sees half a file; the
// folder is made (0700) if missing. The temp file's name starts with a dot
// and ends in .tmp, so a plugin listing its state files can skip it.
//
// It does not fsync: a sandbox's state file must outlive the plugin and
// server processes (a SIGKILL leaves the written data in the page cache,
// which every later reader sees), not the machine, after whose crash no
// env process is left to find. An fsync per write was a tenth of the
// process sandbox's CPU per deploy (docs/performance.md).
func WriteFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("making %s: %w", dir, err)
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	_, err = tmp.Write(data) // CreateTemp made it 0600
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
