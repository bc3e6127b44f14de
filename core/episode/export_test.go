package episode

import "github.com/agentenv/agentenv/core/threadlimit"

// SetExhaustedThreads makes failures see f as the machine's thread
// bounds, until the returned func restores them.
func SetExhaustedThreads(f func() (threadlimit.Limit, bool)) (restore func()) {
	old := exhaustedThreads
	exhaustedThreads = f
	return func() { exhaustedThreads = old }
}
