//go:build race

package eval

// raceEnabled: the race detector is on, and memory use is several
// times what it is without it.
const raceEnabled = true
