//go:build !unix

package runtime

import "os"

// Without flock no claim can be checked: every server counts as running,
// so none is ever reaped by another.
func lockShared(*os.File) error { return nil }

func tryLockExclusive(*os.File) bool { return false }
