package main

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// allocPort picks a free loopback port for sandbox id and reserves it in
// the state dir, so plugin processes sharing it never hand out one port
// twice. It picks below the kernel's ephemeral range: an outgoing
// connection's local port comes from that range, cannot be seen by a test
// bind, and could take the port before the env binds it.
func allocPort(stateDir, id string) (int, error) {
	lo, hi := portRange()
	for range 200 {
		var b [4]byte
		_, _ = rand.Read(b[:])
		port := lo + int(binary.LittleEndian.Uint32(b[:])%uint32(hi-lo+1))
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue // in use
		}
		ln.Close()
		if reservePort(stateDir, port, id) {
			return port, nil
		}
	}
	return 0, fmt.Errorf("no free port in %d-%d after 200 tries", lo, hi)
}

func portFile(stateDir string, port int) string {
	return filepath.Join(stateDir, "ports", strconv.Itoa(port))
}

// reservePort creates the port's reservation file, holding the sandbox's
// id. A reservation whose sandbox has no state file any more is stale and
// taken over.
func reservePort(stateDir string, port int, id string) bool {
	path := portFile(stateDir, port)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return false
	}
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
		if err != nil {
			return false
		}
		if _, err := os.Stat(statePath(stateDir, strings.TrimSpace(string(owner)))); !errors.Is(err, fs.ErrNotExist) {
			return false // held by a sandbox that still has state
		}
		_ = os.Remove(path)
	}
	return false
}

// releasePort drops id's reservation of port.
func releasePort(stateDir string, port int, id string) {
	path := portFile(stateDir, port)
	if owner, err := os.ReadFile(path); err == nil && strings.TrimSpace(string(owner)) == id {
		_ = os.Remove(path)
	}
}

// portRange is where ports are picked: the 12768 ports below the
// kernel's ephemeral range (/proc/sys/net/ipv4/ip_local_port_range).
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
	return max(1024, start-12768), start - 1
}
