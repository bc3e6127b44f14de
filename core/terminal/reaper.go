package terminal

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// procs is this process's own children: the commands the server started
// and has not yet waited for. The orphan reaper leaves them to their
// exec.Cmd.Wait and reaps every other dead child.
var procs = &registry{pids: map[int]struct{}{}}

type registry struct {
	mu   sync.Mutex
	pids map[int]struct{}
}

// start starts cmd and records its pid in one step, so the reaper never
// sees the child before it is recorded.
func (r *registry) start(cmd *exec.Cmd) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := cmd.Start(); err != nil {
		return err
	}
	r.pids[cmd.Process.Pid] = struct{}{}
	return nil
}

// done forgets pid once its Wait has returned.
func (r *registry) done(pid int) {
	r.mu.Lock()
	delete(r.pids, pid)
	r.mu.Unlock()
}

// reapOrphans waits for every dead child of this process that is not one
// of the server's own commands: the processes those commands left behind,
// which the kernel hands to this process when it is PID 1 in a container
// or a subreaper. It returns how many it reaped.
func (r *registry) reapOrphans() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	self := os.Getpid()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if _, ours := r.pids[pid]; ours {
			continue
		}
		state, ppid, ok := procStat(pid)
		if !ok || state != 'Z' || ppid != self {
			continue
		}
		var ws syscall.WaitStatus
		if got, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil); err == nil && got == pid {
			n++
		}
	}
	return n
}

// procStat reads a process's state and parent from /proc/PID/stat.
func procStat(pid int) (state byte, ppid int, ok bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, 0, false
	}
	// "pid (comm) S ppid ...": comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, false
	}
	fields := bytes.Fields(b[i+1:])
	if len(fields) < 2 || len(fields[0]) != 1 {
		return 0, 0, false
	}
	ppid, err = strconv.Atoi(string(fields[1]))
	return fields[0][0], ppid, err == nil
}

// reapInterval backs up SIGCHLD, which the kernel may coalesce.
const reapInterval = 5 * time.Second

// ReapOrphans makes this process the reaper of the processes its
// commands leave behind (a child subreaper, or PID 1 in a container) and
// waits for them as they die, until ctx ends, so none is left a zombie.
// Call it only in a process whose every child is started by this package:
// it reaps any other dead child too.
func ReapOrphans(ctx context.Context, log *slog.Logger) {
	if err := becomeSubreaper(); err != nil {
		log.Warn("cannot become the child subreaper; orphans go to init", "error", err)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGCHLD)
	defer signal.Stop(sig)
	tick := time.NewTicker(reapInterval)
	defer tick.Stop()
	for {
		procs.reapOrphans()
		select {
		case <-ctx.Done():
			return
		case <-sig:
		case <-tick.C:
		}
	}
}
