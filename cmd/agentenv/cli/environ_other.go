//go:build !linux

package cli

import "os"

// scrubEnv removes name from the environment, so no child inherits it.
// Only Linux also blanks the process's initial environment block.
func scrubEnv(name string) error {
	return os.Unsetenv(name)
}
