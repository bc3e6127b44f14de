package local

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// portsDir holds one file per port handed to a live sandbox, named after
// the port and holding the sandbox's id: a reservation every local plugin
// process sharing the state dir sees.
func portsDir(stateDir string) string { return filepath.Join(stateDir, "ports") }

// reservePort takes port for sandbox id. A reservation whose sandbox has
// no state file any more is stale and taken over.
func reservePort(stateDir string, port int, id string) bool {
	dir := portsDir(stateDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return false
	}
	path := filepath.Join(dir, strconv.Itoa(port))
	for range 2 {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err == nil {
			_, werr := f.WriteString(id)
			return errors.Join(werr, f.Close()) == nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return false
		}
		owner, err := os.ReadFile(path)
		if err != nil || owner == nil {
			return false
		}
		if _, err := os.Stat(statePath(stateDir, strings.TrimSpace(string(owner)))); !errors.Is(err, fs.ErrNotExist) {
			return false // a live sandbox holds it
		}
		_ = os.Remove(path) // stale: its sandbox is gone
	}
	return false
}

// releasePort drops id's reservation of port.
func releasePort(stateDir string, port int, id string) {
	path := filepath.Join(portsDir(stateDir), strconv.Itoa(port))
	if owner, err := os.ReadFile(path); err == nil && strings.TrimSpace(string(owner)) == id {
		_ = os.Remove(path)
	}
}

// portRange is the range ports are picked from: below the kernel's
// ephemeral range (from /proc/sys/net/ipv4/ip_local_port_range).
func portRange() (lo, hi int) {
	lo, hi = 20000, 32767
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return lo, hi
	}
	f := strings.Fields(string(data))
	if len(f) != 2 {
		return lo, hi
	}
	start, err := strconv.Atoi(f[0])
	if err != nil || start <= 2048 {
		return lo, hi
	}
	hi = start - 1
	lo = max(1024, hi-12767)
	return lo, hi
}
