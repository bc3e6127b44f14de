//go:build !unix

package bundle

import "time"

func cpuTime() time.Duration { return 0 }
