package hostenv

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-hclog"
)

// DefaultLogMax is how large an env's log file may grow before it is cut
// to its tail.
const DefaultLogMax = 16 << 20

// LogCheckInterval is how often WatchLogs looks at the logs: a flood
// grows a log past its cap by at most what it writes in this time.
const LogCheckInterval = 100 * time.Millisecond

// OpenLog creates an env's log file for its stdout and stderr. It is
// opened for appending, so CapLog can cut it under the running env: the
// env's next write lands at the new end, not at its old offset.
func OpenLog(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC|os.O_APPEND, 0o600)
}

// CapLog cuts the log at path to its tail (a quarter of max, at most 1 MiB),
// from a line start, when it holds more than max bytes; a first line says how much
// was cut. It returns the bytes cut. What the env writes while the cut is
// made may be lost or land before the kept tail: it is a log.
func CapLog(path string, max int64) (int64, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND, 0)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil || !info.Mode().IsRegular() || info.Size() <= max {
		return 0, err
	}
	keep := min(max/4, 1<<20)
	tail := make([]byte, keep)
	n, err := f.ReadAt(tail, info.Size()-keep)
	if err != nil && err != io.EOF {
		return 0, fmt.Errorf("reading the tail of %s: %w", path, err)
	}
	tail = tail[:n]
	if i := bytes.IndexByte(tail, '\n'); i >= 0 && i < len(tail)-1 {
		tail = tail[i+1:]
	}
	cut := info.Size() - int64(len(tail))
	if err := f.Truncate(0); err != nil {
		return 0, fmt.Errorf("cutting %s: %w", path, err)
	}
	head := fmt.Sprintf("[agentenv: %d bytes of this log were cut (it may hold %d); its end follows]\n", cut, max)
	if _, err := f.Write(append([]byte(head), tail...)); err != nil {
		return cut, fmt.Errorf("cutting %s: %w", path, err)
	}
	return cut, nil
}

// WatchLogs keeps every file matching glob() under max() bytes (CapLog),
// looking every LogCheckInterval, and sooner while a log is being cut (a
// flood), until ctx ends. Both are read at each look, so a reconfigured
// plugin's settings apply at once; a max of 0 or less turns the cap off.
func WatchLogs(ctx context.Context, glob func() string, max func() int64, log hclog.Logger) {
	wait := LogCheckInterval
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cutAny := false
		if limit := max(); limit > 0 {
			paths, _ := filepath.Glob(glob())
			for _, p := range paths {
				cut, err := CapLog(p, limit)
				if err != nil && !os.IsNotExist(err) {
					log.Warn("capping an env's log", "path", p, "error", err)
				}
				if cut > 0 {
					cutAny = true
					log.Debug("cut an env's log to its tail", "path", p, "cut", cut)
				}
			}
		}
		if cutAny {
			wait = LogCheckInterval / 16
		} else {
			wait = min(wait*2, LogCheckInterval)
		}
		t.Reset(wait)
	}
}
