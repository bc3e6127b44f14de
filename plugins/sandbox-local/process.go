package local

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentenv/agentenv/sdk/sandbox"
)

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
}

func (pr *proc) exited() bool {
	select {
	case <-pr.done:
		return true
	default:
		return false
	}
}

func (p *Plugin) deployProcess(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	cfg := p.config()
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.ReadyTimeout)
		defer cancel()
	}
	argv := resolveCommand(spec.Dir, spec.Command)
	id := newID()
	root, err := os.MkdirTemp("", rootPrefix+"*")
	if err != nil {
		return sandbox.Sandbox{}, fmt.Errorf("sandbox-local: env %q: temp dir: %w", spec.Env, err)
	}
	work, tmp := filepath.Join(root, "work"), filepath.Join(root, "tmp")
	logPath := filepath.Join(root, envLog)
	var logf *os.File
	err = errors.Join(os.Mkdir(work, 0o700), os.Mkdir(tmp, 0o700))
	if err == nil {
		logf, err = os.Create(logPath)
	}
	if err != nil {
		os.RemoveAll(root)
		return sandbox.Sandbox{}, fmt.Errorf("sandbox-local: env %q: preparing %s: %w", spec.Env, root, err)
	}
	port, err := p.allocPort()
	if err != nil {
		logf.Close()
		os.RemoveAll(root)
		return sandbox.Sandbox{}, fmt.Errorf("sandbox-local: env %q: %w", spec.Env, err)
	}
	environ := buildEnviron(cfg.PassEnv, spec, port, work, tmp, id)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = work
	cmd.Env = environ
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own group, so teardown reaches whatever the env starts.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	logf.Close() // the child holds its own descriptor
	if err != nil {
		p.releasePort(port)
		os.RemoveAll(root)
		return sandbox.Sandbox{}, fmt.Errorf("sandbox-local: env %q: starting %q (in %s): %w", spec.Env, argv, spec.Dir, err)
	}
	pr := &proc{cmd: cmd, done: make(chan struct{})}
	go func() {
		pr.err = cmd.Wait()
		close(pr.done)
	}()
	pid := cmd.Process.Pid
	start, _ := procStart(pid)
	st := &state{
		ID: id, Env: spec.Env, PID: pid, PGID: pid, Port: port,
		Endpoint: "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		Labels:   copyLabels(spec.Labels), Started: time.Now().UTC(), ProcStart: start,
		Root: root, WorkDir: work, EnvDir: spec.Dir, Environ: environ,
	}
	p.mu.Lock()
	p.procs[id] = pr
	p.mu.Unlock()
	fail := func(why error) (sandbox.Sandbox, error) {
		if err := stopGroup(context.Background(), st, pr, cfg.Grace, p.log); err != nil {
			p.log.Error("stopping a failed env", "id", id, "error", err)
		}
		tail := logTail(logPath, 2048)
		p.forget(st)
		if tail != "" {
			why = fmt.Errorf("%w; its output ends:\n%s", why, tail)
		}
		return sandbox.Sandbox{}, fmt.Errorf("sandbox-local: env %q (%q): %w", spec.Env, argv, why)
	}
	// Written before the wait, so a plugin killed meanwhile leaves a
	// record the next one can reap.
	if err := writeState(cfg.StateDir, st); err != nil {
		return fail(err)
	}
	began := time.Now()
	if err := waitReady(ctx, st.Endpoint, pr); err != nil {
		return fail(err)
	}
	p.log.Info("deployed", "id", id, "env", spec.Env, "pid", pid, "endpoint", st.Endpoint, "ready_after", time.Since(began).String())
	return st.sandbox(), nil
}

// waitReady retries MCP initialize until the env answers, exits, or ctx ends.
func waitReady(ctx context.Context, endpoint string, pr *proc) error {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil
	defer tr.CloseIdleConnections()
	client := mcp.NewClient(&mcp.Implementation{Name: "agentenv-sandbox-local", Version: Version}, nil)
	wait := 20 * time.Millisecond
	var last error
	for {
		if pr.exited() {
			return fmt.Errorf("exited before answering MCP initialize: %v", exitText(pr.err))
		}
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		session, err := client.Connect(actx, &mcp.StreamableClientTransport{
			Endpoint: endpoint + "/mcp", HTTPClient: &http.Client{Transport: tr},
			DisableStandaloneSSE: true, MaxRetries: -1,
		}, nil)
		cancel()
		if err == nil {
			_ = session.Close()
			return nil
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("no answer to MCP initialize at %s/mcp: %w (last error: %v)", endpoint, ctx.Err(), last)
		case <-pr.done:
		case <-time.After(wait):
		}
		wait = min(wait*2, 250*time.Millisecond)
	}
}

func exitText(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// stopGroup stops a sandbox's process group: SIGTERM, then SIGKILL after
// grace (at once if ctx ends first). pr is nil for a sandbox another plugin
// process started.
func stopGroup(ctx context.Context, st *state, pr *proc, grace time.Duration, log hclog.Logger) error {
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
	if waitGone(ctx, gone, grace) {
		return nil
	}
	log.Warn("env ignored SIGTERM; killing its group", "id", st.ID, "pgid", st.PGID, "grace", grace)
	_ = syscall.Kill(-st.PGID, syscall.SIGKILL)
	if waitGone(context.Background(), gone, killWait) {
		return nil
	}
	return fmt.Errorf("processes %v of group %d still run %s after SIGKILL", groupMembers(st.PGID), st.PGID, killWait)
}

// waitGone polls gone until it holds (true), d passes or ctx ends (false).
func waitGone(ctx context.Context, gone func() bool, d time.Duration) bool {
	deadline := time.Now().Add(d)
	wait := 5 * time.Millisecond
	for {
		if gone() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		select {
		case <-ctx.Done():
			return gone()
		case <-time.After(wait):
		}
		wait = min(wait*2, 100*time.Millisecond)
	}
}

// Exec runs cmd in the sandbox's working dir with the env's environment,
// as a plain subprocess in its own process group.
func (p *Plugin) Exec(ctx context.Context, id string, cmd []string) (sandbox.ExecResult, error) {
	st, err := readState(p.config().StateDir, id)
	if err != nil {
		return sandbox.ExecResult{}, err
	}
	if len(cmd) == 0 || cmd[0] == "" {
		return sandbox.ExecResult{}, fmt.Errorf("sandbox-local: exec in %s: empty command", id)
	}
	argv := resolveCommand(st.EnvDir, cmd)
	c := exec.CommandContext(ctx, argv[0], argv[1:]...)
	c.Dir = st.WorkDir
	c.Env = st.Environ
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c.Cancel = func() error { return syscall.Kill(-c.Process.Pid, syscall.SIGKILL) }
	// Pipes we own, not exec's copying: Wait then returns when the command
	// exits, even if a background child still holds its output open.
	var stdout, stderr cappedBuffer
	stdout.max, stderr.max = 1<<20, 1<<20
	drained, err := pipeOutput(c, &stdout, &stderr)
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

// drainWait bounds how long Exec reads output after the command exits.
const drainWait = time.Second

// cappedBuffer keeps the first max bytes written and drops the rest.
type cappedBuffer struct {
	bytes.Buffer
	max       int
	truncated bool
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.Len(); room < len(p) {
		b.truncated = true
		if room > 0 {
			b.Buffer.Write(p[:room])
		}
		return len(p), nil
	}
	return b.Buffer.Write(p)
}

func (b *cappedBuffer) String() string {
	if b.truncated {
		return b.Buffer.String() + "\n[output truncated]"
	}
	return b.Buffer.String()
}

// resolveCommand makes a relative program path (one with a slash) relative
// to the env's folder; bare names are looked up on PATH at start.
func resolveCommand(dir string, argv []string) []string {
	out := append([]string(nil), argv...)
	if strings.Contains(out[0], "/") && !filepath.IsAbs(out[0]) && dir != "" {
		out[0] = filepath.Join(dir, out[0])
	}
	return out
}

// buildEnviron gives the env PATH, the variables config passes through,
// its own variables, then agentenv's (which win).
func buildEnviron(pass []string, spec sandbox.Spec, port int, work, tmp, id string) []string {
	path := os.Getenv("PATH")
	if path == "" {
		path = "/usr/local/bin:/usr/bin:/bin"
	}
	env := []string{"PATH=" + path}
	for _, name := range pass {
		if v, ok := os.LookupEnv(name); ok {
			env = append(env, name+"="+v)
		}
	}
	keys := make([]string, 0, len(spec.EnvVars))
	for k := range spec.EnvVars {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		env = append(env, k+"="+spec.EnvVars[k])
	}
	return append(env,
		"AGENTENV_PORT="+strconv.Itoa(port),
		"AGENTENV_ENV_DIR="+spec.Dir,
		"AGENTENV_SANDBOX_ID="+id,
		"HOME="+work,
		"TMPDIR="+tmp,
	)
}

// allocPort finds a free loopback port not already handed to a live
// sandbox of this process (the kernel may offer a just-closed one again).
func (p *Plugin) allocPort() (int, error) {
	for range 50 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("finding a free port: %w", err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		p.mu.Lock()
		_, taken := p.ports[port]
		if !taken {
			p.ports[port] = struct{}{}
		}
		p.mu.Unlock()
		if !taken {
			return port, nil
		}
	}
	return 0, errors.New("finding a free port: every port offered is in use by a sandbox")
}

func (p *Plugin) releasePort(port int) {
	p.mu.Lock()
	delete(p.ports, port)
	p.mu.Unlock()
}

func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "local-" + hex.EncodeToString(b[:])
}

func copyLabels(in map[string]string) map[string]string {
	out := make(map[string]string, len(in))
	for k, v := range in {
		out[k] = v
	}
	return out
}

// logTail returns the last n bytes of a file, from a line start.
func logTail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return ""
	}
	off := max(info.Size()-n, 0)
	data, err := io.ReadAll(io.NewSectionReader(f, off, info.Size()-off))
	if err != nil {
		return ""
	}
	if off > 0 {
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			data = data[i+1:]
		}
	}
	return strings.TrimSpace(string(data))
}
