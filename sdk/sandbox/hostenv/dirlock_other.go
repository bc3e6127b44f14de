//go:build !linux

package hostenv

import "sync"

// dirLocks serialises takeovers within this process where there is no
// flock here; plugin processes sharing a folder are not kept apart.
var dirLocks sync.Mutex

// lockDir is Linux's flock elsewhere; here a process-wide mutex.
func lockDir(string) (unlock func(), err error) {
	dirLocks.Lock()
	return dirLocks.Unlock, nil
}
