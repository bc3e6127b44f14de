package local

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/agentenv/agentenv/sdk/sandbox"
	"github.com/agentenv/agentenv/sdk/sandbox/hostenv"
)

// EnvEnvDir is the variable holding the env's folder in its bundle (the
// local sandbox runs the env from a temp dir of its own).
const EnvEnvDir = hostenv.EnvEnvDir

// rootPrefix starts the name of every sandbox temp dir; only such dirs are
// ever removed.
const rootPrefix = "agentenv-local-"

// envLog is the file in a sandbox's root that takes the env's output.
const envLog = "env.log"

// killWait bounds how long a SIGKILLed group may take to disappear.
const killWait = 5 * time.Second

// proc is a sandbox process this plugin process started and reaps.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once the leader is reaped
	err  error         // cmd.Wait's result; read only after done
	// pid and start are the env's leader and its start time once it runs
	// (0 before); guarded by Plugin.mu. The state file holds no pid (it is
	// written once, before the start), so List and Terminate take it here.
	pid   int
	start uint64
}

func (pr *proc) exited() bool {
	select {
	case <-pr.done:
		return true
	default:
		return false
	}
}

// selfStart is this process's start time, recorded as the owner of the
// sandboxes it deploys.
var selfStart, _ = procStart(os.Getpid())

// portTries bounds how often a deploy starts its env again on a new port
// after the env found its port taken before it could bind it.
const portTries = 3

func (p *Plugin) deployProcess(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	if err := processRefuses(spec); err != nil {
		return sandbox.Sandbox{}, err
	}
	cfg := p.config()
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(cfg.ReadyTimeout))
		defer cancel()
	}
	var err error
	for try := 1; ; try++ {
		var sb sandbox.Sandbox
		var portLost bool
		sb, portLost, err = p.startProcess(ctx, spec, cfg)
		if !portLost || try == portTries || ctx.Err() != nil {
			return sb, err
		}
		p.log.Warn("the env's port was taken before it bound it; starting it again on another", "env", spec.Env, "try", try, "error", err)
	}
}

// startProcess starts spec's env once and waits until it listens. portLost
// reports that the env exited because its port was already in use.
func (p *Plugin) startProcess(ctx context.Context, spec sandbox.Spec, cfg Config) (_ sandbox.Sandbox, portLost bool, _ error) {
	argv := hostenv.ResolveCommand(spec.Dir, spec.Command)
	id := newID()
	port, err := p.ports(cfg.StateDir).Alloc(id)
	if err != nil {
		return sandbox.Sandbox{}, false, fmt.Errorf("sandbox-local: env %q: %w", spec.Env, err)
	}
	// The temp dir is named after the sandbox and recorded before it is
	// made, once: a plugin killed at any point leaves a state file by which
	// the next one finds the dir, and the env by its id in the env's
	// environment (findByIDs; the pid is not written back, which was a
	// second file per deploy).
	root := filepath.Join(os.TempDir(), rootPrefix+id)
	work, tmp := filepath.Join(root, "work"), filepath.Join(root, "tmp")
	logPath := filepath.Join(root, envLog)
	environ := hostenv.Environ(cfg.PassEnv, spec, hostenv.Vars{Port: port, ID: id, Home: work, Tmp: tmp})
	st := &state{
		handle: handle{Port: port, Root: root},
		ID:     id, Env: spec.Env,
		Endpoint: "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		Labels:   hostenv.CopyLabels(spec.Labels), Started: time.Now().UTC(),
		WorkDir: work, EnvDir: spec.Dir, Environ: environ,
		Owner: os.Getpid(), OwnerStart: selfStart,
	}
	pr := &proc{done: make(chan struct{})}
	p.mu.Lock()
	p.procs[id] = pr
	p.mu.Unlock()
	abandon := func(err error) (sandbox.Sandbox, bool, error) {
		close(pr.done)
		p.forget(st)
		return sandbox.Sandbox{}, false, fmt.Errorf("sandbox-local: env %q: %w", spec.Env, err)
	}
	if err := p.createState(cfg.StateDir, st); err != nil {
		return abandon(err)
	}
	var logf *os.File
	if p.spareRoots.takeTo(root) {
		// A spare's log is there, empty (truncateUnheld): opened as
		// OpenLog opens it, less the truncation.
		logf, err = os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND, 0)
	} else {
		err = errors.Join(os.Mkdir(root, 0o700), os.Mkdir(work, 0o700), os.Mkdir(tmp, 0o700))
		if err == nil {
			logf, err = hostenv.OpenLog(logPath)
		}
	}
	p.watchLogs()
	if err != nil {
		return abandon(fmt.Errorf("preparing %s: %w", root, err))
	}
	defer logf.Close() // the child holds its own descriptor
	// A deploy the host gave up on while this one waited (for the port
	// lock, a slow disk) starts no env: one started now would only be
	// stopped again, and a plugin stopped meanwhile would leave it running.
	if err := ctx.Err(); err != nil {
		return abandon(fmt.Errorf("the deploy was given up before the env started: %w", err))
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = work
	cmd.Env = environ
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own group, so teardown reaches whatever the env starts.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	pidfd := withPidfd(cmd.SysProcAttr)
	if err := cmd.Start(); err != nil {
		return abandon(fmt.Errorf("starting %q (in %s): %w", argv, spec.Dir, err))
	}
	began := time.Now()
	pr.cmd = cmd
	// The pid and its start time before the reaper runs: once reaped, the
	// pid is gone from /proc (and waitExit releases cmd.Process).
	pid := cmd.Process.Pid
	st.PID, st.PGID = pid, pid
	st.ProcStart, _ = procStart(pid)
	p.mu.Lock()
	pr.pid, pr.start = pid, st.ProcStart
	p.mu.Unlock()
	go func() {
		pr.err = waitExit(cmd, *pidfd)
		close(pr.done)
	}()
	fail := func(why error) (sandbox.Sandbox, bool, error) {
		if err := stopGroup(context.Background(), st, pr, time.Duration(cfg.Grace), p.log); err != nil {
			p.log.Error("stopping a failed env", "id", id, "error", err)
		}
		tail := hostenv.FileTail(logPath, 2048)
		p.forget(st)
		lost := pr.exited() && strings.Contains(tail, "address already in use")
		if tail != "" {
			why = fmt.Errorf("%w; its output ends:\n%s", why, tail)
		}
		return sandbox.Sandbox{}, lost, fmt.Errorf("sandbox-local: env %q (%q): %w", spec.Env, argv, why)
	}
	if !procScan { // no /proc to find the env by: record its pid
		if err := writeState(cfg.StateDir, st); err != nil {
			return fail(err)
		}
	}
	// MCP is the host's business, not the sandbox's: listening is ready.
	// The first probe comes near when this command listened before.
	expect := p.listening.Expect(argv[0])
	if err := hostenv.WaitReadyExpecting(ctx, port, expect, pr.done, func() error { return pr.err }, hostenv.DialProbe(port)); err != nil {
		return fail(err)
	}
	took := time.Since(began)
	p.listening.Observe(argv[0], took)
	p.log.Info("deployed", "id", id, "env", spec.Env, "pid", pid, "endpoint", st.Endpoint, "listening_after", took.String())
	return st.sandbox(), false, nil
}

// removeRoot removes a process sandbox's temp dir. Most envs leave it as
// the deploy made it (env.log, empty work/ and tmp/), which four calls
// remove, where os.RemoveAll's walk makes several times as many; anything
// else in it (ENOTEMPTY) is left to RemoveAll.
func removeRoot(root string) error {
	gone := func(err error) bool { return err == nil || errors.Is(err, syscall.ENOENT) }
	if !gone(syscall.Unlink(filepath.Join(root, envLog))) {
		return os.RemoveAll(root)
	}
	for _, dir := range []string{filepath.Join(root, "work"), filepath.Join(root, "tmp"), root} {
		if !gone(syscall.Rmdir(dir)) {
			return os.RemoveAll(root)
		}
	}
	return nil
}

// watchLogs starts, once per plugin process, the watcher that keeps every
// process env's log under log_max_mb: its own envs' and those of earlier
// plugin processes, which run on after them.
func (p *Plugin) watchLogs() {
	p.logs.Do(func() {
		glob := filepath.Join(os.TempDir(), rootPrefix+"*", envLog)
		go hostenv.WatchLogs(context.Background(), func() string { return glob },
			func() int64 { return p.config().LogMaxMB << 20 }, p.log)
	})
}

// stopGroup stops a sandbox's process group: SIGTERM, then SIGKILL after
// grace (at once if ctx ends first). pr is nil for a sandbox another plugin
// process started.
func stopGroup(ctx context.Context, st *state, pr *proc, grace time.Duration, log hclog.Logger) error {
	if st.PGID <= 0 {
		return nil // never started
	}
	if pr != nil && pr.cmd == nil {
		pr = nil
	}
	gone := func() bool {
		if pr != nil && !pr.exited() {
			return false
		}
		return len(groupMembers(st.PGID)) == 0
	}
	// Even for a process we started: once reaped, its pid can come back as
	// another group's leader.
	if start, ok := procStart(st.PID); ok && st.ProcStart != 0 && start != st.ProcStart {
		return nil // the pid was reused, so our group is long gone
	}
	if gone() {
		return nil
	}
	_ = syscall.Kill(-st.PGID, syscall.SIGTERM)
	if waitGone(ctx, gone, pr, grace) {
		return nil
	}
	log.Warn("env ignored SIGTERM; killing its group", "id", st.ID, "pgid", st.PGID, "grace", grace)
	_ = syscall.Kill(-st.PGID, syscall.SIGKILL)
	if waitGone(context.Background(), gone, pr, killWait) {
		return nil
	}
	return fmt.Errorf("processes %v of group %d still run %s after SIGKILL", groupMembers(st.PGID), st.PGID, killWait)
}

// waitGone waits until gone holds (true), d passes or ctx ends (false).
// For a process this plugin started, the leader's exit wakes it at once;
// the rest of the group (rarely still there then) is polled.
func waitGone(ctx context.Context, gone func() bool, pr *proc, d time.Duration) bool {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	if pr != nil {
		select {
		case <-pr.done:
		case <-ctx.Done():
			return gone()
		case <-deadline.C:
			return gone()
		}
	}
	wait := time.Millisecond
	for {
		if gone() {
			return true
		}
		poll := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			poll.Stop()
			return gone()
		case <-deadline.C:
			poll.Stop()
			return gone()
		case <-poll.C:
		}
		wait = min(wait*2, 100*time.Millisecond)
	}
}

// Exec runs cmd in the sandbox: in its container (execDocker), or in a
// process sandbox's working dir with the env's environment, as a plain
// subprocess in its own process group.
func (p *Plugin) Exec(ctx context.Context, sb sandbox.Sandbox, cmd []string) (sandbox.ExecResult, error) {
	if isDocker(sb.ID) {
		return p.execDocker(ctx, sb, cmd)
	}
	id := sb.ID
	st, err := readState(p.config().StateDir, id)
	if err != nil {
		return sandbox.ExecResult{}, err
	}
	if len(cmd) == 0 || cmd[0] == "" {
		return sandbox.ExecResult{}, fmt.Errorf("sandbox-local: exec in %s: empty command", id)
	}
	argv := hostenv.ResolveCommand(st.EnvDir, cmd)
	c := exec.CommandContext(ctx, argv[0], argv[1:]...)
	c.Dir = st.WorkDir
	c.Env = st.Environ
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c.Cancel = func() error { return syscall.Kill(-c.Process.Pid, syscall.SIGKILL) }
	// Pipes we own, not exec's copying: Wait then returns when the command
	// exits, even if a background child still holds its output open.
	stdout, stderr := hostenv.NewCappedBuffer(execOutputMax), hostenv.NewCappedBuffer(execOutputMax)
	drained, err := pipeOutput(c, stdout, stderr)
	if err != nil {
		return sandbox.ExecResult{}, fmt.Errorf("sandbox-local: exec %q in %s: %w", cmd, id, err)
	}
	err = c.Start()
	if err == nil {
		err = c.Wait()
		// Background children of the command die with it.
		_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
	}
	drained()
	res := sandbox.ExecResult{Stdout: stdout.String(), Stderr: stderr.String()}
	var exitErr *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return res, fmt.Errorf("sandbox-local: exec %q in %s: %w", cmd, id, ctx.Err())
	case errors.As(err, &exitErr):
		res.ExitCode = exitErr.ExitCode()
	case err != nil:
		return res, fmt.Errorf("sandbox-local: exec %q in %s: %w", cmd, id, err)
	}
	return res, nil
}

// pipeOutput connects c's stdout and stderr to OS pipes read into out and
// errOut. The returned func closes the write ends and waits for the readers.
func pipeOutput(c *exec.Cmd, out, errOut io.Writer) (func(), error) {
	or, ow, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	er, ew, err := os.Pipe()
	if err != nil {
		or.Close()
		ow.Close()
		return nil, err
	}
	c.Stdout, c.Stderr = ow, ew
	var wg sync.WaitGroup
	for _, pair := range []struct {
		r *os.File
		w io.Writer
	}{{or, out}, {er, errOut}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = io.Copy(pair.w, pair.r)
			pair.r.Close()
		}()
	}
	return func() {
		ow.Close()
		ew.Close()
		done := make(chan struct{})
		go func() {
			wg.Wait()
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(drainWait):
			// A child that left the group (setsid) still holds the write
			// ends; closing ours ends the copies instead of waiting on it.
			or.Close()
			er.Close()
			<-done
		}
	}, nil
}

// execOutputMax bounds each of a command's stdout and stderr.
const execOutputMax = 1 << 20

// drainWait bounds how long Exec reads output after the command exits.
const drainWait = time.Second

func newID() string { return "local-" + newHex() }

// newHex is 16 random hex digits: the random part of sandbox ids.
func newHex() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// processRefuses says why process mode cannot run spec as asked: a plain
// process can neither take agentenv's injected terminal nor be kept off
// the network.
func processRefuses(spec sandbox.Spec) error {
	switch {
	case spec.Terminal != nil:
		return terminalRefusal(spec, "it would run as a process")
	case spec.NoInternet:
		return fmt.Errorf("sandbox-local: env %q must have no internet access, which process mode cannot enforce (a process shares this machine's network): "+
			"give the env an image and run it in Docker mode (--sandbox-config mode=docker), or with --sandbox k8s", spec.Env)
	}
	return nil
}
