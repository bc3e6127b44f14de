package local

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// procStat reads the fields of /proc/<pid>/stat after the command name:
// fields[0] is the state, [2] the pgrp, [19] the start time.
func procStat(pid int) ([][]byte, bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil, false
	}
	// The command name may hold spaces and parens; it ends at the last ')'.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return nil, false
	}
	fields := bytes.Fields(data[i+1:])
	if len(fields) < 20 {
		return nil, false
	}
	return fields, true
}

// procStart returns the process's start time in clock ticks since boot.
func procStart(pid int) (uint64, bool) {
	f, ok := procStat(pid)
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseUint(string(f[19]), 10, 64)
	return v, err == nil
}

// groupMembers returns the live (non-zombie) processes of a process group.
func groupMembers(pgid int) []int {
	if err := syscall.Kill(-pgid, 0); err == syscall.ESRCH {
		return nil // the common case once a group is gone: no scan
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	want := []byte(strconv.Itoa(pgid))
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		f, ok := procStat(pid)
		if !ok || f[0][0] == 'Z' || !bytes.Equal(f[2], want) {
			continue
		}
		pids = append(pids, pid)
	}
	return pids
}

// procScan says findByIDs can find envs by their environment: a state
// file need not be written again with the env's pid.
const procScan = true

// findByIDs scans /proc once for the env processes of the sandboxes ids
// names (the value of the environment variable name, which every deploy
// sets): how a plugin finds the pid of an env that another plugin process
// started, since a state file is written once, before its env starts.
// Every process of a sandbox carries its id (the env's children, command
// verifiers), so the env's leader is told apart: it leads its own process
// group, and started first among those that do (a verifier's group).
func findByIDs(name string, ids map[string]bool) map[string]int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	key := []byte(name + "=")
	type candidate struct {
		pid   int
		leads bool
		start uint64
	}
	best := map[string]candidate{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil {
			continue
		}
		id, ok := envValue(data, key)
		if !ok {
			// An env that wrote over its environment block (a "process
			// title" library) still writes to its log: the sandbox's.
			id, ok = logOwner(e.Name())
		}
		if !ok || !ids[id] {
			continue
		}
		f, ok := procStat(pid)
		if !ok || f[0][0] == 'Z' {
			continue
		}
		start, _ := strconv.ParseUint(string(f[19]), 10, 64)
		c := candidate{pid: pid, leads: string(f[2]) == e.Name(), start: start}
		if prev, seen := best[id]; seen && (prev.leads && !c.leads || prev.leads == c.leads && prev.start <= c.start) {
			continue
		}
		best[id] = c
	}
	found := make(map[string]int, len(best))
	for id, c := range best {
		found[id] = c.pid
	}
	return found
}

// logOwner returns the sandbox whose env.log the process's stdout is.
func logOwner(pid string) (string, bool) {
	target, err := os.Readlink("/proc/" + pid + "/fd/1")
	if err != nil || filepath.Base(target) != envLog {
		return "", false
	}
	return strings.CutPrefix(filepath.Base(filepath.Dir(target)), rootPrefix)
}

// envValue returns the value of the variable key ("NAME=") in an
// environment block (NUL-separated).
func envValue(block, key []byte) (string, bool) {
	for len(block) > 0 {
		entry, rest, _ := bytes.Cut(block, []byte{0})
		if v, ok := bytes.CutPrefix(entry, key); ok {
			return string(v), true
		}
		block = rest
	}
	return "", false
}

// withPidfd asks cmd's start for a pidfd of the env (os/exec keeps a
// duplicate of its own), which waitExit waits on.
func withPidfd(attr *syscall.SysProcAttr) *int {
	fd := -1
	attr.PidFD = &fd
	return &fd
}

// waitExit reaps the env's leader and returns its exit as cmd.Wait does
// (nil for a clean one). cmd.Wait holds a thread in waitid(2) for each
// live env; this waits on the env's pidfd in the runtime's poller instead.
// Each thread returning from a long wait woke the runtime's sysmon into a
// spell of 20 µs polls: most of this plugin's CPU per deploy
// (docs/performance.md). Where the pidfd cannot be polled, cmd.Wait does.
func waitExit(cmd *exec.Cmd, pidfd int) error {
	if pidfd < 0 {
		return cmd.Wait()
	}
	if err := syscall.SetNonblock(pidfd, true); err != nil {
		syscall.Close(pidfd)
		return cmd.Wait()
	}
	f := os.NewFile(uintptr(pidfd), "pidfd")
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return cmd.Wait()
	}
	var exit error
	reaped := false
	err = rc.Read(func(fd uintptr) bool {
		var info [128]byte // siginfo_t
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pPidfd, fd, uintptr(unsafe.Pointer(&info[0])),
			syscall.WEXITED|syscall.WNOHANG, 0, 0)
		switch {
		case errno == syscall.EINTR:
			return false
		case errno != 0:
			exit = os.NewSyscallError("waitid", errno)
			return true
		}
		// si_pid, si_status follow si_signo, si_errno, si_code, in a
		// union aligned as a pointer.
		off := 12 + (unsafe.Sizeof(uintptr(0)) - 4)
		if binary.NativeEndian.Uint32(info[off:]) == 0 {
			return false // not exited yet: wait until the pidfd is readable
		}
		reaped = true
		exit = exitError(int32(binary.NativeEndian.Uint32(info[8:])), int(int32(binary.NativeEndian.Uint32(info[off+8:]))))
		return true
	})
	if !reaped && err != nil { // not pollable after all
		return cmd.Wait()
	}
	_ = cmd.Process.Release() // closes os/exec's pidfd
	return exit
}

// pPidfd is waitid's P_PIDFD.
const pPidfd = 3

// exitError describes a reaped process's exit as os.ProcessState does:
// nil for exit status 0.
func exitError(code int32, status int) error {
	const cldExited, cldDumped = 1, 3
	switch {
	case code == cldExited && status == 0:
		return nil
	case code == cldExited:
		return fmt.Errorf("exit status %d", status)
	case code == cldDumped:
		return fmt.Errorf("signal: %v (core dumped)", syscall.Signal(status))
	default:
		return fmt.Errorf("signal: %v", syscall.Signal(status))
	}
}

// truncateUnheld empties the file at path if no other process has it
// open for writing: a write lease is granted only then (fcntl(2),
// F_SETLEASE). False: it is held, or could not be checked or emptied.
func truncateUnheld(path string) bool {
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETLEASE, unix.F_WRLCK); err != nil {
		return false
	}
	defer unix.FcntlInt(uintptr(fd), unix.F_SETLEASE, unix.F_UNLCK)
	return unix.Ftruncate(fd, 0) == nil
}
