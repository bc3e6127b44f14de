package local

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/agentenv/agentenv/sdk/sandbox/hostenv"
)

// A process sandbox's files outlive its env: its temp dir (root, env.log,
// work/, tmp/), its state file and its port reservation. Once the env is
// gone, teardown renames them aside as spares, and a later deploy renames
// spares to its own instead of making three dirs and three files. Making
// and deleting them was most of what a deploy cost the file system: on
// ext4 without a journal every new inode is found by stepping over the
// group's recently deleted ones (docs/performance.md), so each deploy grew
// dearer the faster deploys came. A rename allocates nothing.
//
// A temp dir is kept only as the deploy made it (work/ and tmp/ empty,
// 0700) and with no process holding env.log open for writing (one that
// outlived its group could write to it still); its log is emptied, so a
// spare dir holds nothing of an episode. A state file is cut to a byte.
// Only this process's own envs' files are kept (forget).
//
// A spare's name says whose it is (agentenv-local-spare-<pid>.<start>-<n>
// in the temp dir, .spare-<pid>.<start>-<n> in the state dir and its ports
// folder, where listing skips dot files): the plugin removes its own at
// Cleanup, and a later plugin those of a process that is gone
// (reapSpares), so a SIGKILLed plugin leaves none past the next one's
// first List.

// maxSpares bounds the spares of each kind one plugin process keeps: about
// the envs it runs at once, past which a teardown removes as before.
const maxSpares = 64

const (
	sparePrefix     = rootPrefix + "spare-" // spare dirs, in the temp dir
	spareFilePrefix = ".spare-"             // spare state files, in the state dir
)

// spares is a pool of spare dirs or files, named prefix<owner>-<n> in
// their folder.
var _ hostenv.Spares = (*spares)(nil)

type spares struct {
	prefix string
	// makeFiles: Take makes a spare file where the pool has none (the
	// port reservations: each is a file renamed into place).
	makeFiles bool
	mu        sync.Mutex
	paths     []string // newest last
	n         int      // names handed out
}

// owner is this process's part of a spare's name.
func spareOwner() string {
	return strconv.Itoa(os.Getpid()) + "." + strconv.FormatUint(selfStart, 10)
}

// takeTo renames a spare to dst, which must not exist; false: none was
// left (or dst is there), and the caller makes dst.
func (s *spares) takeTo(dst string) bool {
	for {
		src, ok := s.pop()
		if !ok {
			return false
		}
		err := hostenv.RenameNoReplace(src, dst)
		if err == nil {
			return true
		}
		if errors.Is(err, fs.ErrExist) {
			s.putBack(src)
			return false
		}
		_ = os.RemoveAll(src) // gone or unusable: try the next
	}
}

// Take hands out a spare, no longer the pool's; with none, a pool that
// makes files makes one in dir, empty (hostenv.Spares).
func (s *spares) Take(dir string) (string, bool) {
	if src, ok := s.pop(); ok {
		return src, true
	}
	if !s.makeFiles || !procScan {
		return "", false
	}
	path := s.name(dir)
	f, err := createExcl(path)
	if err != nil {
		return "", false
	}
	return path, f.Close() == nil
}

// pop takes the newest spare out of the pool.
func (s *spares) pop() (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.paths) == 0 {
		return "", false
	}
	src := s.paths[len(s.paths)-1]
	s.paths = s.paths[:len(s.paths)-1]
	return src, true
}

// name is a new spare's name in dir.
func (s *spares) name(dir string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	return filepath.Join(dir, s.prefix+spareOwner()+"-"+strconv.Itoa(s.n))
}

func (s *spares) putBack(path string) {
	s.mu.Lock()
	s.paths = append(s.paths, path)
	s.mu.Unlock()
}

// Put renames src aside as a spare; false: the pool is full (or spares
// are off here), and the caller removes src (hostenv.Spares).
func (s *spares) Put(src string) bool {
	if !procScan {
		return false // no /proc to tell a live owner from a gone one
	}
	s.mu.Lock()
	full := len(s.paths) >= maxSpares
	s.mu.Unlock()
	if full {
		return false
	}
	name := s.name(filepath.Dir(src))
	if os.Rename(src, name) != nil {
		return false
	}
	s.putBack(name)
	return true
}

// drain removes every spare of the pool.
func (s *spares) drain() error {
	s.mu.Lock()
	paths := s.paths
	s.paths = nil
	s.mu.Unlock()
	var errs []error
	for _, p := range paths {
		if err := os.RemoveAll(p); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// pristine reports whether root is as a deploy made it: its log, and
// work/ and tmp/ empty.
func pristine(root string) bool {
	if fi, err := os.Lstat(filepath.Join(root, envLog)); err != nil || fi.Mode() != 0o600 {
		return false
	}
	return dirHolds(root, envLog, "tmp", "work") && dirHolds(filepath.Join(root, "work")) && dirHolds(filepath.Join(root, "tmp"))
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
	slices.Sort(got)
	for i := range names {
		if got[i] != names[i] {
			return false
		}
	}
	return true
}

// reapSpares removes the spares named prefix... in dir of plugin
// processes that are gone.
func reapSpares(dir, prefix string) error {
	names, err := filepath.Glob(filepath.Join(dir, prefix+"*"))
	if err != nil {
		return err
	}
	var errs []error
	for _, path := range names {
		owner, _, ok := strings.Cut(strings.TrimPrefix(filepath.Base(path), prefix), "-")
		if !ok {
			continue
		}
		pid, start, _ := strings.Cut(owner, ".")
		p, err1 := strconv.Atoi(pid)
		st, err2 := strconv.ParseUint(start, 10, 64)
		if err1 != nil || err2 != nil {
			continue // not a name we make
		}
		if st != 0 && running(p, st) {
			continue // its plugin still runs
		}
		if err := os.RemoveAll(path); err != nil && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// recycleRoot keeps a torn-down env's temp dir as a spare, its log
// emptied, when it is as the deploy made it and no process holds the log
// open (one that left the env's process group could write to it still);
// false: the caller removes it.
func (p *Plugin) recycleRoot(root string) bool {
	log := filepath.Join(root, envLog)
	return pristine(root) && truncateUnheld(log) && p.spareRoots.Put(root)
}

// recycleState keeps a torn-down env's state file as a spare, cut to its
// first byte (the env's environment is not kept at rest; not to 0, which
// on ext4 makes the next write's close flush it to the disk:
// auto_da_alloc); false: the caller removes it.
func (p *Plugin) recycleState(path string) bool {
	return os.Truncate(path, 1) == nil && p.spareStates.Put(path)
}

// reapSpares removes the spares of plugin processes that are gone, in the
// temp dir, in stateDir and in its ports folder.
func (p *Plugin) reapSpares(stateDir string) {
	err := errors.Join(reapSpares(os.TempDir(), sparePrefix), reapSpares(stateDir, spareFilePrefix),
		reapSpares(portsDir(stateDir), spareFilePrefix))
	if err != nil {
		p.log.Warn("removing spares of plugin processes that are gone", "error", err)
	}
}

// Cleanup removes the spares this plugin keeps (sdk.Cleaner): the host has
// torn its envs down before it stops the plugin.
func (p *Plugin) Cleanup() error {
	return errors.Join(p.spareRoots.drain(), p.spareStates.drain(), p.sparePorts.drain())
}
