//go:build !linux

package threadlimit

// NprocLimit is the per-user process limit where it can be read: only
// on Linux.
func NprocLimit() (Limit, bool) { return Limit{}, false }
