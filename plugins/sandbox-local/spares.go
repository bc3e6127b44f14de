package local

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// A process sandbox's temp dir (root, work/, tmp/) outlives its env: once
// the env is gone and the dirs are as the deploy made them (empty, 0700),
// teardown renames the root aside as a spare, and a later deploy renames a
// spare to its own root instead of making three dirs. Making and removing
// dirs is most of what a deploy costs the file system: on ext4 without a
// journal every new inode is found by stepping over the group's recently
// deleted ones (docs/performance.md), so three dirs made and removed per
// episode made each deploy dearer the faster deploys came. A rename
// allocates nothing. env.log is never kept (a process that outlived its
// group could hold it open), and a spare is handed out only as it was put
// aside: nothing of an episode is in it.
//
// A spare's name says whose it is (agentenv-local-spare-<pid>.<start>-<n>):
// the plugin removes its own at Cleanup, and a later plugin those of a
// process that is gone (reapSpares), so a SIGKILLed plugin leaves none past
// the next one's first List.

// maxSpares bounds the spares one plugin process keeps: about the envs it
// runs at once, past which a teardown removes the dirs as before.
const maxSpares = 64

const sparePrefix = rootPrefix + "spare-"

type spareDirs struct {
	mu   sync.Mutex
	dirs []string // spare roots, newest last
	n    int      // names handed out
}

// owner is this process's part of a spare's name.
func spareOwner() string {
	return strconv.Itoa(os.Getpid()) + "." + strconv.FormatUint(selfStart, 10)
}

// take renames a spare to root (which must not exist); false: none was
// left, and the caller makes the dirs.
func (s *spareDirs) take(root string) bool {
	for {
		s.mu.Lock()
		if len(s.dirs) == 0 {
			s.mu.Unlock()
			return false
		}
		dir := s.dirs[len(s.dirs)-1]
		s.dirs = s.dirs[:len(s.dirs)-1]
		s.mu.Unlock()
		if os.Rename(dir, root) == nil {
			return true
		}
		_ = os.RemoveAll(dir) // gone or unusable: try the next
	}
}

// put keeps root as a spare when it holds exactly work/ and tmp/, both
// empty, all three 0700 dirs; false: the caller removes it.
func (s *spareDirs) put(root string) bool {
	if !procScan {
		return false // no /proc to tell a live owner from a gone one
	}
	s.mu.Lock()
	full := len(s.dirs) >= maxSpares
	s.n++
	name := filepath.Join(filepath.Dir(root), sparePrefix+spareOwner()+"-"+strconv.Itoa(s.n))
	s.mu.Unlock()
	if full || !pristine(root) {
		return false
	}
	if os.Rename(root, name) != nil {
		return false
	}
	s.mu.Lock()
	s.dirs = append(s.dirs, name)
	s.mu.Unlock()
	return true
}

// pristine reports whether root is as a deploy made it, less its log.
func pristine(root string) bool {
	return dirHolds(root, "tmp", "work") && dirHolds(filepath.Join(root, "work")) && dirHolds(filepath.Join(root, "tmp"))
}

// dirHolds reports whether dir is a 0700 dir holding exactly names
// (sorted), nothing else.
func dirHolds(dir string, names ...string) bool {
	f, err := os.Open(dir)
	if err != nil {
		return false
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || fi.Mode() != os.ModeDir|0o700 {
		return false
	}
	got, err := f.Readdirnames(len(names) + 1)
	if err != nil && !errors.Is(err, io.EOF) {
		return false
	}
	if len(got) != len(names) {
		return false
	}
	if len(got) == 2 && got[0] > got[1] {
		got[0], got[1] = got[1], got[0]
	}
	for i := range names {
		if got[i] != names[i] {
			return false
		}
	}
	return true
}

// drain removes every spare this plugin keeps.
func (s *spareDirs) drain() error {
	s.mu.Lock()
	dirs := s.dirs
	s.dirs = nil
	s.mu.Unlock()
	var errs []error
	for _, d := range dirs {
		if err := os.RemoveAll(d); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// reapSpares removes the spares in tmp of plugin processes that are gone.
func reapSpares(tmp string) error {
	names, err := filepath.Glob(filepath.Join(tmp, sparePrefix+"*"))
	if err != nil {
		return err
	}
	var errs []error
	for _, dir := range names {
		owner, _, ok := strings.Cut(strings.TrimPrefix(filepath.Base(dir), sparePrefix), "-")
		if !ok {
			continue
		}
		pid, start, _ := strings.Cut(owner, ".")
		p, err1 := strconv.Atoi(pid)
		st, err2 := strconv.ParseUint(start, 10, 64)
		if err1 != nil || err2 != nil {
			continue // not a name we make
		}
		if now, alive := procStart(p); alive && now == st {
			continue // its plugin still runs
		}
		if err := os.RemoveAll(dir); err != nil && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// recycle keeps a torn-down env's temp dir as a spare, less its log;
// false: the caller removes it.
func (p *Plugin) recycle(root string) bool {
	if err := syscall.Unlink(filepath.Join(root, envLog)); err != nil && !errors.Is(err, syscall.ENOENT) {
		return false
	}
	return p.spares.put(root)
}

// Cleanup removes the spare temp dirs this plugin keeps (sdk.Cleaner):
// the host has torn its envs down before it stops the plugin.
func (p *Plugin) Cleanup() error { return p.spares.drain() }
