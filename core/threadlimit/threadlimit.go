// Package threadlimit reads the bounds on the threads this machine and
// this process may run, and how many are in use. Every env process's
// threads count against them (kernel.pid_max: 32,768 by default), so
// thousands of live process or Docker envs can run the machine out:
// forks and thread creations then fail, and envs die. serve warns at
// start when its capacity could pass a bound, and a deploy or call that
// fails while the machine is at one says so.
package threadlimit

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Limit is one bound on threads (kernel tasks: a process counts one per
// thread).
type Limit struct {
	Name  string // what it is, as an operator sets it: "kernel.pid_max"
	Max   int64
	Used  int64  // in use now (-1: unknown)
	Raise string // how to raise it
}

// Limits are the bounds on this process and its children that can be
// read here (Linux; none elsewhere).
func Limits() []Limit { return read("/") }

// read reads the limits with root as the file system's root (tests give
// a folder shaped like /proc and /sys).
func read(root string) []Limit {
	in := func(p string) string { return filepath.Join(root, p) }
	total := int64(-1)
	// /proc/loadavg's fourth field is running/total kernel tasks.
	if f := strings.Fields(readString(in("proc/loadavg"))); len(f) >= 4 {
		if _, t, ok := strings.Cut(f[3], "/"); ok {
			total, _ = strconv.ParseInt(t, 10, 64)
		}
	}
	var out []Limit
	if v, ok := readInt(in("proc/sys/kernel/pid_max")); ok {
		out = append(out, Limit{"kernel.pid_max", v, total, "sysctl -w kernel.pid_max=4194304"})
	}
	if v, ok := readInt(in("proc/sys/kernel/threads-max")); ok {
		out = append(out, Limit{"kernel.threads-max", v, total, "sysctl -w kernel.threads-max=<more>"})
	}
	if dir := pidsCgroup(root); dir != "" {
		if v, ok := readInt(filepath.Join(dir, "pids.max")); ok { // "max": no bound
			used, ok := readInt(filepath.Join(dir, "pids.current"))
			if !ok {
				used = -1
			}
			out = append(out, Limit{"the cgroup's pids.max", v, used, "TasksMax=infinity in the systemd unit, or --pids-limit for a container"})
		}
	}
	return out
}

// pidsCgroup is the folder of this process's pids cgroup ("" if none):
// cgroup v2's unified hierarchy, or v1's pids controller.
func pidsCgroup(root string) string {
	for _, line := range strings.Split(readString(filepath.Join(root, "proc/self/cgroup")), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		switch {
		case f[0] == "0" && f[1] == "":
			if d := filepath.Join(root, "sys/fs/cgroup", f[2]); exists(filepath.Join(d, "pids.max")) {
				return d
			}
		case strings.Contains(","+f[1]+",", ",pids,"):
			return filepath.Join(root, "sys/fs/cgroup/pids", f[2])
		}
	}
	return ""
}

// margin is how close to a bound counts as at it: forks fail a little
// before it (threads come and go between a count and a fork).
func margin(bound int64) int64 { return max(64, bound/100) }

// Exhausted is the first bound the machine is at now, if any.
func Exhausted() (Limit, bool) { return exhausted(Limits()) }

func exhausted(ls []Limit) (Limit, bool) {
	for _, l := range ls {
		if l.Used >= 0 && l.Max-l.Used < margin(l.Max) {
			return l, true
		}
	}
	return Limit{}, false
}

// Note says that the machine is at l, for an error.
func (l Limit) Note() string {
	return fmt.Sprintf("the machine is out of threads: %d in use, %s is %d (raise it: %s; or lower --max-concurrent-envs)", l.Used, l.Name, l.Max, l.Raise)
}

// PerEnv is the threads one env is taken to hold, for the start-up
// check: a Go env's runtime starts about a thread per core (GridSim's
// held 7 on 2 cores); an env in another language may hold more or fewer.
func PerEnv(cores int) int64 { return int64(cores) + 5 }

// Warning is the start-up warning for envs live envs of perEnv threads
// each: "" when every bound has room for them besides what is in use.
func Warning(ls []Limit, envs int, perEnv int64) string {
	need := int64(envs) * perEnv
	var over []string
	for _, l := range ls {
		used := max(l.Used, 0)
		if used+need > l.Max {
			over = append(over, fmt.Sprintf("%s is %d with %d in use (raise it: %s)", l.Name, l.Max, used, l.Raise))
		}
	}
	if len(over) == 0 {
		return ""
	}
	return fmt.Sprintf("this machine may run out of threads: %d live envs at about %d threads each need ~%d more, and %s. Past it forks and thread starts fail and envs die (EXECUTION_ERROR, DEPLOY_FAILED, naming this); lower --max-concurrent-envs or raise the bound",
		envs, perEnv, need, strings.Join(over, "; "))
}

func readString(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return string(b)
}

func readInt(path string) (int64, bool) {
	v, err := strconv.ParseInt(strings.TrimSpace(readString(path)), 10, 64)
	return v, err == nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
