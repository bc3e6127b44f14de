package main

import (
	"bytes"
	"os"
	"strconv"
	"strings"
)

// statFields returns the fields of /proc/<pid>/stat after the command
// name (which may hold spaces and parentheses, so it ends at the last
// ')'): [0] is the state, [19] the start time.
func statFields(pid int) ([]string, bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil, false
	}
	end := bytes.LastIndexByte(data, ')')
	if end < 0 {
		return nil, false
	}
	f := strings.Fields(string(data[end+1:]))
	return f, len(f) >= 20
}

// procStart is a process's start time in clock ticks since boot.
func procStart(pid int) (uint64, bool) {
	f, ok := statFields(pid)
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseUint(f[19], 10, 64)
	return v, err == nil
}

// running reports whether pid is the process that started at start (so
// not a later one the kernel gave the same pid) and has not exited. An
// unknown start (0) is not enough to signal a process by.
func running(pid int, start uint64) bool {
	f, ok := live(pid)
	return ok && start != 0 && f[19] == strconv.FormatUint(start, 10)
}

// live returns a process's stat fields if it exists and is not a zombie.
func live(pid int) ([]string, bool) {
	if pid <= 0 {
		return nil, false
	}
	f, ok := statFields(pid)
	if !ok || f[0] == "Z" || f[0] == "X" {
		return nil, false
	}
	return f, true
}

// pids lists the processes in /proc.
func pids() []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	out := make([]int, 0, len(entries))
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// pidNamespace is the inode of a process's PID namespace.
func pidNamespace(pid int) (uint64, bool) {
	link, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/pid")
	if err != nil {
		return 0, false
	}
	inode, ok := strings.CutPrefix(link, "pid:[")
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseUint(strings.TrimSuffix(inode, "]"), 10, 64)
	return v, err == nil
}

// members lists the live processes of the PID namespace ns.
func members(ns uint64) []int {
	if ns == 0 {
		return nil
	}
	var out []int
	for _, pid := range pids() {
		if got, ok := pidNamespace(pid); ok && got == ns {
			if _, ok := live(pid); ok {
				out = append(out, pid)
			}
		}
	}
	return out
}

// findKeeper finds the keeper of the sandbox in root by its command line:
// how a plugin finds a sandbox whose deploy was cut short before it
// recorded the keeper's pid.
func findKeeper(root string) (int, bool) {
	want := infoPath(root)
	for _, pid := range pids() {
		data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		if err != nil {
			continue
		}
		args := strings.Split(string(data), "\x00")
		if len(args) > 3 && args[1] == "keep" && args[2] == "--info" && args[3] == want {
			if _, ok := live(pid); !ok {
				continue
			}
			return pid, true
		}
	}
	return 0, false
}
