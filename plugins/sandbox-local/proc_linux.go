package local

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
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

// findByVar returns the pid of a process whose environment holds
// name=value: how a plugin finds an env it started but was killed before
// recording the pid of.
func findByVar(name, value string) (int, bool) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, false
	}
	want := []byte(name + "=" + value + "\x00")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil {
			continue
		}
		if bytes.HasPrefix(data, want) || bytes.Contains(data, append([]byte{0}, want...)) {
			return pid, true
		}
	}
	return 0, false
}
