// Package tempfile makes the temp files a file is written through before
// it is renamed into place, and removes those a killed writer left.
//
// A temp file for NAME in a folder is .NAME.tmp-PID-RANDOM, PID being the
// writer's process. A writer killed between creating it and renaming it
// (SIGKILL, out of memory, a power cut) leaves it behind; the next Create
// for the same NAME in the same folder removes those whose process no
// longer runs, and only those: a file of another name, of a live writer,
// or not of this naming is left alone.
package tempfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Create creates a temp file in dir for the file name (opened for writing,
// mode 0600), first removing the stale ones of the same name.
func Create(dir, name string) (*os.File, error) {
	RemoveStale(dir, name)
	return os.CreateTemp(dir, fmt.Sprintf("%s%d-", prefix(name), os.Getpid()))
}

func prefix(name string) string { return "." + name + ".tmp-" }

// RemoveStale removes dir's temp files for name whose writer process is
// gone, returning how many. It is best effort: a file it cannot judge or
// remove stays.
func RemoveStale(dir, name string) int {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	p, n := prefix(name), 0
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), p)
		if !ok || !e.Type().IsRegular() {
			continue
		}
		pidText, random, ok := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if !ok || random == "" || err != nil || pid <= 0 || pid == os.Getpid() {
			continue // not of this naming, or this process's own
		}
		if !gone(pid) {
			continue
		}
		if os.Remove(filepath.Join(dir, e.Name())) == nil {
			n++
		}
	}
	return n
}

// gone reports whether no process has the id pid. A process of another
// user (EPERM) is alive; a pid reused by another process since keeps the
// file, which errs on the side of keeping.
func gone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}
