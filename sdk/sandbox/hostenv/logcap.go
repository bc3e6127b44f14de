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
// when it holds more than max bytes; a first line says how much was cut.
// It returns the bytes cut. The env's writes (O_APPEND, OpenLog) go on
// meanwhile. On Linux filesystems that can (ext4, xfs) the head is
// collapsed in place by the kernel, which loses no write. Elsewhere what
// the env adds while the tail is read is read too, and the file is cut to
// the kept length before the kept bytes are written over its start, so a
// later write lands after the kept tail; a write in the instant between
// the last look and the cut is lost.
func CapLog(path string, max int64) (int64, error) {
	// Not O_APPEND: the kept tail is written at offset 0.
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	unlock, ok := lockLog(f)
	if !ok {
		return 0, nil // another watcher is cutting it now
	}
	defer unlock()
	info, err := f.Stat()
	if err != nil || !info.Mode().IsRegular() || info.Size() <= max {
		return 0, err
	}
	keep := min(max/4, 1<<20)
	size := info.Size()
	if n, ok := collapseHead(f, size-keep); ok {
		// The head is gone without a lost write; the cut line goes over
		// the first (partial) line or lines of what is kept.
		return n, markCut(f, n, max)
	}
	tail, err := readTail(f, size, keep)
	if err != nil {
		return 0, fmt.Errorf("reading the tail of %s: %w", path, err)
	}
	// Catch up with what the env wrote while the tail was read.
	for range 8 {
		st, err := f.Stat()
		if err != nil {
			return 0, fmt.Errorf("cutting %s: %w", path, err)
		}
		if st.Size() <= size {
			break
		}
		if st.Size()-size >= keep {
			tail, err = readTail(f, st.Size(), keep)
		} else {
			more := make([]byte, st.Size()-size)
			var n int
			n, err = f.ReadAt(more, size)
			tail = append(tail, more[:n]...)
			if int64(len(tail)) > keep {
				tail = tail[int64(len(tail))-keep:]
			}
		}
		if err != nil && err != io.EOF {
			return 0, fmt.Errorf("reading the tail of %s: %w", path, err)
		}
		size = st.Size()
	}
	if i := bytes.IndexByte(tail, '\n'); i >= 0 && i < len(tail)-1 {
		tail = tail[i+1:]
	}
	cut := size - int64(len(tail))
	head := fmt.Sprintf("[agentenv: %d bytes of this log were cut (it may hold %d); its end follows]\n", cut, max)
	buf := append([]byte(head), tail...)
	if err := f.Truncate(int64(len(buf))); err != nil {
		return 0, fmt.Errorf("cutting %s: %w", path, err)
	}
	if _, err := f.WriteAt(buf, 0); err != nil {
		return cut, fmt.Errorf("cutting %s: %w", path, err)
	}
	return cut, nil
}

// markCut writes the cut line over the start of f, padded with spaces to
// the end of a line of what is kept, so no newline moves.
func markCut(f *os.File, cut, max int64) error {
	head := fmt.Sprintf("[agentenv: %d bytes of this log were cut (it may hold %d); its end follows]", cut, max)
	start := make([]byte, 64<<10)
	n, err := f.ReadAt(start, 0)
	if err != nil && err != io.EOF {
		return fmt.Errorf("marking the cut of %s: %w", f.Name(), err)
	}
	start = start[:n]
	end := len(head)
	if i := bytes.IndexByte(start[min(end, len(start)):], '\n'); i >= 0 && end <= len(start) {
		end += i
	}
	line := []byte(head)
	for len(line) < end {
		line = append(line, ' ')
	}
	if end >= len(start) || start[end] != '\n' {
		line = append(line, '\n')
	}
	if _, err := f.WriteAt(line, 0); err != nil {
		return fmt.Errorf("marking the cut of %s: %w", f.Name(), err)
	}
	return nil
}

// readTail reads the last keep bytes of f's first size bytes.
func readTail(f *os.File, size, keep int64) ([]byte, error) {
	keep = min(keep, size)
	tail := make([]byte, keep)
	n, err := f.ReadAt(tail, size-keep)
	if err == io.EOF {
		err = nil
	}
	return tail[:n], err
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
				// One stat per log and tick: most are under their cap, and
				// CapLog's open, lock and close of each, ten times a second,
				// were a tenth of a process sandbox's CPU.
				if info, err := os.Stat(p); err != nil || info.Size() <= limit {
					continue
				}
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
