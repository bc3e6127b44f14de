package hostenv

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// portTries bounds how many random ports Alloc tries.
const portTries = 200

// Ports hands out loopback ports for sandboxes and reserves each in Dir, a
// folder of one entry per port, named after the port and naming its
// owner (the sandbox's id). Every plugin process given the same Dir sees
// the others' reservations, so none hands out a port another holds; two
// plugins may share a Dir only when each one's Held recognises the other's
// owners.
//
// A reservation is a symbolic link whose target is the owner's id: made
// and read in one system call each, and never half written. It is never
// followed. With Spares it is a regular file holding the id, filled before
// it is renamed into place, so never half written either (earlier versions
// wrote such files too).
type Ports struct {
	// Dir is the reservation folder, made (0700) on first use.
	Dir string
	// Held reports whether owner still holds its ports; a reservation whose
	// owner is no longer held (its sandbox left no state) is stale and
	// taken over, once it is older than StaleAfter.
	Held func(owner string) bool
	// StaleAfter is how long a new reservation is kept whether or not Held
	// knows its owner (0: one minute). A deploy reserves its port before it
	// records its sandbox (the port is in the record): in between, Held
	// cannot tell it from a deploy that died, and a second deploy taking the
	// port over would be handed the first one's env.
	StaleAfter time.Duration

	// Spares, when set, lends Reserve a spare file in Dir, which it fills
	// with the owner and renames to the reservation (exclusive: never over
	// another), and takes back a released reservation instead of it being
	// removed: no file made or removed per reservation, where on some file
	// systems (ext4 without a journal) a new file steps over every one
	// removed in the last minutes. nil: a link made and removed each time.
	Spares Spares

	now func() time.Time // tests' clock; nil: time.Now
}

// Spares is a pool of spare files in a Ports' Dir.
type Spares interface {
	// Take hands out a spare file in dir (its path), no longer the pool's:
	// one it keeps or, where it keeps none, one it makes now; false: it
	// cannot.
	Take(dir string) (path string, ok bool)
	// Put renames the file at path aside as a spare; false: it did not,
	// and the caller removes the file.
	Put(path string) bool
}

// defaultStaleAfter is StaleAfter's default.
const defaultStaleAfter = time.Minute

// HeldWhileExists is a Held for owners that keep a file (their state file)
// while they live: the owner holds its ports until path(owner) is gone.
// An error other than the file's absence counts as held, so a port is
// never taken over on a doubt.
func HeldWhileExists(path func(owner string) string) func(owner string) bool {
	return func(owner string) bool {
		_, err := os.Stat(path(owner))
		return !errors.Is(err, fs.ErrNotExist)
	}
}

// Path is the reservation of port.
func (p Ports) Path(port int) string { return filepath.Join(p.Dir, strconv.Itoa(port)) }

// Owner is the id that holds port's reservation ("" with an error when
// there is none).
func (p Ports) Owner(port int) (string, error) { return readOwner(p.Path(port)) }

// Alloc picks a free loopback port for owner and reserves it. It picks
// below the kernel's ephemeral range (PortRange): an outgoing connection's
// local port comes from that range, cannot be seen by a test bind, and
// could take the port before the env binds it.
func (p Ports) Alloc(owner string) (int, error) {
	lo, hi := PortRange()
	for range portTries {
		var b [4]byte
		_, _ = rand.Read(b[:])
		port := lo + int(binary.LittleEndian.Uint32(b[:])%uint32(hi-lo+1))
		if !bindable(port) {
			continue // in use
		}
		if p.Reserve(port, owner) {
			return port, nil
		}
	}
	return 0, fmt.Errorf("finding a free port in %d-%d: every port tried is in use", lo, hi)
}

// Reserve takes port for owner (an id: not empty, no slash), taking over
// a stale reservation. It is false when another live owner holds the port
// or the folder is unusable.
func (p Ports) Reserve(port int, owner string) bool {
	if owner == "" || strings.ContainsRune(owner, '/') {
		return false
	}
	path := p.Path(port)
	if p.Spares != nil {
		if ok, done := p.reserveSpare(path, owner); done {
			return ok
		}
	}
	for try := range 2 {
		err := os.Symlink(owner, path)
		if err == nil {
			return true
		}
		if errors.Is(err, fs.ErrNotExist) && try == 0 {
			// The folder's first use: made here rather than checked
			// before every reservation.
			if os.MkdirAll(p.Dir, 0o700) != nil {
				return false
			}
			continue
		}
		if !errors.Is(err, fs.ErrExist) {
			return false
		}
		return p.takeOver(path, owner)
	}
	return false
}

// reserveSpare reserves path for owner with a spare file; done is false
// where there is no spare or it could not be used, and the caller makes a
// link instead.
func (p Ports) reserveSpare(path, owner string) (ok, done bool) {
	tmp, found := p.Spares.Take(p.Dir)
	if !found {
		return false, false
	}
	if err := writeOwner(tmp, owner); err != nil {
		_ = os.Remove(tmp)
		return false, false
	}
	err := RenameNoReplace(tmp, path)
	if err == nil {
		return true, true
	}
	if !p.Spares.Put(tmp) {
		_ = os.Remove(tmp)
	}
	if errors.Is(err, fs.ErrExist) {
		return p.takeOver(path, owner), true
	}
	return false, false
}

// takeOver takes a taken port for owner if its reservation is stale. It
// holds the folder's lock, so two deploys never both take one port over
// (the second would remove the first one's new reservation); a deploy
// reserving a free port needs no lock, the link's creation being
// exclusive.
func (p Ports) takeOver(path, owner string) bool {
	unlock, err := lockDir(p.Dir)
	if err != nil {
		return false
	}
	defer unlock()
	if !p.stale(path) {
		return false // a live sandbox, or a deploy recording one, holds it
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false
	}
	return os.Symlink(owner, path) == nil
}

// stale reports whether the reservation at path may be taken over: gone,
// or older than StaleAfter with an owner Held does not know.
func (p Ports) stale(path string) bool {
	info, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return true
	}
	if err != nil {
		return false
	}
	now, after := time.Now, p.StaleAfter
	if p.now != nil {
		now = p.now
	}
	if after <= 0 {
		after = defaultStaleAfter
	}
	if now().Sub(info.ModTime()) < after {
		return false
	}
	held, err := readOwner(path)
	if errors.Is(err, fs.ErrNotExist) {
		return true
	}
	return err == nil && (p.Held == nil || !p.Held(held))
}

// Release drops owner's reservation of port; another owner's is kept. It
// removes it under the folder's lock, as takeOver replaces one: else a
// takeover between its read and its removal would lose the new owner's.
func (p Ports) Release(port int, owner string) {
	path := p.Path(port)
	unlock, err := lockDir(p.Dir)
	if err != nil {
		return
	}
	defer unlock()
	if held, err := readOwner(path); err == nil && held == owner {
		// Only a file is kept (a link, as takeOver and earlier versions
		// make, cannot take another owner).
		if info, err := os.Lstat(path); err != nil || !info.Mode().IsRegular() || p.Spares == nil || !p.Spares.Put(path) {
			_ = os.Remove(path)
		}
	}
}

// writeOwner fills a spare reservation file with owner; it never follows
// a link. It writes over what the file held and cuts it to owner's length,
// never to 0 first: on ext4 a file cut to 0 and written again is flushed
// to the disk at its close (auto_da_alloc), a write-back per reservation.
func writeOwner(path, owner string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteAt([]byte(owner), 0)
	if err == nil {
		err = f.Truncate(int64(len(owner)))
	}
	return errors.Join(err, f.Close())
}

// readOwner reads a reservation: a link's target, or a regular file's
// content as earlier versions wrote it.
func readOwner(path string) (string, error) {
	owner, err := os.Readlink(path)
	if errors.Is(err, syscall.EINVAL) { // not a link
		var data []byte
		data, err = os.ReadFile(path)
		owner = string(data)
	}
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(owner), nil
}

// PortRange is where ports are picked: the 12768 ports below the kernel's
// ephemeral range (/proc/sys/net/ipv4/ip_local_port_range), or 20000-32767
// where that cannot be read or leaves too little room. It is read once a
// process: a deploy does not pay for reading /proc.
func PortRange() (lo, hi int) {
	portRange.once.Do(func() {
		data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
		if err != nil {
			portRange.lo, portRange.hi = 20000, 32767
			return
		}
		portRange.lo, portRange.hi = portRangeBelow(string(data))
	})
	return portRange.lo, portRange.hi
}

var portRange struct {
	once   sync.Once
	lo, hi int
}

// portRangeBelow is PortRange for the contents of ip_local_port_range.
func portRangeBelow(ephemeral string) (lo, hi int) {
	f := strings.Fields(ephemeral)
	if len(f) != 2 {
		return 20000, 32767
	}
	start, err := strconv.Atoi(f[0])
	if err != nil || start <= 2048 {
		return 20000, 32767
	}
	return max(1024, start-12768), start - 1
}
