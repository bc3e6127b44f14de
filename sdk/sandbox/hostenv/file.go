package hostenv

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/agentenv/agentenv/sdk/atomicfile"
)

// WriteFileAtomic writes data to path (0600) through a temp file in the
// same folder and a rename (atomicfile.Write), so no reader ever sees
// half a file; the folder is made (0700) if missing. The temp file's name
// starts with a dot and ends in .tmp, so a plugin listing its state files
// can skip it.
func WriteFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("making %s: %w", dir, err)
	}
	return atomicfile.Write(path, data, 0o600)
}
