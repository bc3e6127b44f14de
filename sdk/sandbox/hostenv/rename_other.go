//go:build !linux

package hostenv

import "errors"

// RenameNoReplace is Linux's renameat2 with RENAME_NOREPLACE; not offered
// here.
func RenameNoReplace(string, string) error { return errors.ErrUnsupported }
