package terminal

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// job is one command to run in its own process group.
type job struct {
	args    []string
	dir     string
	env     []string
	timeout time.Duration
	stdout  io.Writer
	stderr  io.Writer // may be stdout: one pipe then carries both
	// keepBackground leaves the group's other processes running once the
	// command itself has exited (a server the model started with &); without
	// it the whole group is killed then.
	keepBackground bool
}

// outcome is how a job ended.
type outcome struct {
	exitCode  int            // 128+n when killed by signal n, as bash reports it
	signal    syscall.Signal // the signal that killed it; 0 if it exited
	timedOut  bool
	cancelled bool // the caller's context ended first
	// pipesOpen: background processes still held stdout/stderr when the
	// command exited; what they print after it is not shown.
	pipesOpen bool
}

// pipeGrace is how long output may keep arriving after the command itself
// exits (its last children flushing); background processes that hold the
// pipes longer are not waited for.
const pipeGrace = time.Second

// run starts j in a process group of its own and waits for it, its timeout
// or ctx, whichever comes first; at the timeout or ctx's end the whole
// group is killed. The error is for a command that could not start.
func (s *Server) run(ctx context.Context, j job) (outcome, error) {
	var out outcome
	cmd := exec.Command(j.args[0], j.args[1:]...)
	cmd.Dir, cmd.Env = j.dir, j.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// Our own pipes rather than exec's: exec's Wait would wait for every
	// process holding them, a background server included, forever.
	var writers []*os.File
	closeWriters := func() {
		for _, w := range writers {
			_ = w.Close()
		}
	}
	var copied sync.WaitGroup
	startPipe := func(w io.Writer) (*os.File, error) {
		r, pw, err := os.Pipe()
		if err != nil {
			return nil, fmt.Errorf("making a pipe: %w", err)
		}
		writers = append(writers, pw)
		copied.Add(1)
		go func() {
			defer copied.Done()
			_, _ = io.Copy(w, r)
			_ = r.Close()
		}()
		return pw, nil
	}
	var err error
	if cmd.Stdout, err = startPipe(j.stdout); err != nil {
		closeWriters()
		return out, err
	}
	if j.stderr == j.stdout {
		cmd.Stderr = cmd.Stdout
	} else if cmd.Stderr, err = startPipe(j.stderr); err != nil {
		closeWriters()
		return out, err
	}
	err = procs.start(cmd)
	closeWriters() // the child holds its own copies
	if err != nil {
		return out, err
	}
	pgid := cmd.Process.Pid
	s.groups.add(pgid)
	defer s.groups.remove(pgid)

	waited := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		procs.done(cmd.Process.Pid)
		waited <- err
	}()
	var timer <-chan time.Time
	if j.timeout > 0 {
		t := time.NewTimer(j.timeout)
		defer t.Stop()
		timer = t.C
	}
	select {
	case <-waited:
	case <-timer:
		out.timedOut = true
		killGroup(pgid)
		<-waited
	case <-ctx.Done():
		out.cancelled = true
		killGroup(pgid)
		<-waited
	}
	if out.timedOut || out.cancelled || !j.keepBackground {
		// The group id stays reserved while any member lives, so this
		// reaches only what the command left behind.
		killGroup(pgid)
	}
	out.exitCode, out.signal = exitStatus(cmd.ProcessState)

	flushed := make(chan struct{})
	go func() { copied.Wait(); close(flushed) }()
	select {
	case <-flushed:
	case <-time.After(pipeGrace):
		out.pipesOpen = true
	}
	return out, nil
}

// exitStatus is the exit code as bash reports it (128+n for signal n).
func exitStatus(ps *os.ProcessState) (int, syscall.Signal) {
	if ps == nil {
		return -1, 0
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal()), ws.Signal()
	}
	return ps.ExitCode(), 0
}

// killGroup kills process group pgid outright; a group already gone is fine.
func killGroup(pgid int) {
	_ = syscall.Kill(-pgid, syscall.SIGKILL) // ESRCH: already gone
}

// groupSet is the process groups of the commands running now, killed
// together when the server closes.
type groupSet struct {
	mu     sync.Mutex
	groups map[int]struct{}
	closed bool
}

func (g *groupSet) add(pgid int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		killGroup(pgid)
		return
	}
	if g.groups == nil {
		g.groups = map[int]struct{}{}
	}
	g.groups[pgid] = struct{}{}
}

func (g *groupSet) remove(pgid int) {
	g.mu.Lock()
	delete(g.groups, pgid)
	g.mu.Unlock()
}

// killAll kills every group and every group added from now on.
func (g *groupSet) killAll() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = true
	for pgid := range g.groups {
		killGroup(pgid)
	}
}
