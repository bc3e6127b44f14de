package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/agentenv/agentenv/sdk/sandbox"
	"github.com/agentenv/agentenv/sdk/sandbox/hostenv"
)

// EnvEnvDir is the variable holding the env's folder in its bundle (the
// env runs in a work folder of its own).
const EnvEnvDir = hostenv.EnvEnvDir

// keeper is a sandbox's keeper process, when this plugin process started it.
type keeper struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once the keeper has exited and been reaped
	err  error         // its exit; read after done
}

func (k *keeper) exited() bool {
	select {
	case <-k.done:
		return true
	default:
		return false
	}
}

// Prepare checks that bwrap works here and runs the env's build command in
// its folder. The SDK runs it once per env per plugin process, before the
// env's first Deploy, and agentenv serve asks for it at start, so a machine
// without bwrap is reported before any episode.
func (p *plugin) Prepare(ctx context.Context, spec sandbox.Spec) error {
	if err := runnable(spec); err != nil {
		return err
	}
	if err := p.checkBwrap(); err != nil {
		return err
	}
	if len(spec.Build) == 0 {
		return nil
	}
	// The build runs on the host, as the bundle's author wrote it (it may
	// need the network and the Go or pip caches); the env it builds is
	// what runs sandboxed.
	if err := hostenv.Build(ctx, p.log, spec, time.Duration(p.config().BuildTimeout)); err != nil {
		return fmt.Errorf("%s: %w", pluginID, err)
	}
	return nil
}

// runnable says why this sandbox cannot run spec's env, if it cannot.
func runnable(spec sandbox.Spec) error {
	switch {
	case len(spec.Command) > 0 && spec.Dir != "" && filepath.IsAbs(spec.Dir):
		return nil
	case len(spec.Command) > 0:
		return fmt.Errorf("%s: env %q: its folder %q is not an absolute path", pluginID, spec.Env, spec.Dir)
	case spec.Image != "":
		return fmt.Errorf("%s: env %q has only an image (%s); bwrap runs commands, so give the env a command in env.toml", pluginID, spec.Env, spec.Image)
	}
	return fmt.Errorf("%s: env %q has no command to run", pluginID, spec.Env)
}

// checkBwrap runs a trivial sandbox once per process, so a missing bwrap
// or a kernel without user namespaces is one clear error.
func (p *plugin) checkBwrap() error {
	p.checked.Do(func() {
		bwrap := p.config().Bwrap
		path, err := exec.LookPath(bwrap)
		if err != nil {
			p.bwrapOK = fmt.Errorf("%s: %w; install bubblewrap (Debian and Ubuntu: apt-get install bubblewrap) or set \"bwrap\" in the plugin's config", pluginID, err)
			return
		}
		out, err := exec.Command(path, "--ro-bind", "/", "/", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--cap-drop", "ALL", "--", "true").CombinedOutput()
		if err != nil {
			p.bwrapOK = fmt.Errorf("%s: %s cannot make a sandbox here: %w%s (unprivileged users need user namespaces: sysctl kernel.unprivileged_userns_clone=1, or an AppArmor profile allowing bwrap)", pluginID, path, err, hostenv.OutputTail(string(out)))
		}
	})
	return p.bwrapOK
}

// portTries bounds how often Deploy starts an env again on another port
// after something else took its port before it could bind it.
const portTries = 3

// Deploy starts spec's env in a new sandbox and returns once the env
// listens on its port.
func (p *plugin) Deploy(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	if err := runnable(spec); err != nil {
		return sandbox.Sandbox{}, err
	}
	if err := p.checkBwrap(); err != nil {
		return sandbox.Sandbox{}, err
	}
	cfg := p.config()
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(cfg.ReadyTimeout))
		defer cancel()
	}
	for try := 1; ; try++ {
		sb, portLost, err := p.start(ctx, spec, cfg)
		if !portLost || try == portTries || ctx.Err() != nil {
			return sb, err
		}
		p.log.Warn("the env's port was taken before it bound it; starting it again on another", "env", spec.Env, "try", try, "error", err)
	}
}

// start starts spec's env once. portLost reports an env that failed
// because its host port was taken.
func (p *plugin) start(ctx context.Context, spec sandbox.Spec, cfg Config) (_ sandbox.Sandbox, portLost bool, _ error) {
	id := newID()
	fail := func(err error) (sandbox.Sandbox, bool, error) {
		return sandbox.Sandbox{}, false, fmt.Errorf("%s: env %q: %w", pluginID, spec.Env, err)
	}
	port, err := ports(cfg.StateDir).Alloc(id)
	if err != nil {
		return fail(err)
	}
	binds := make([]bind, 0, len(cfg.Binds))
	for _, b := range cfg.Binds {
		bd, _ := parseBind(b) // checked by Configure
		binds = append(binds, bd)
	}
	root := sandboxRoot(cfg.StateDir, id)
	lay := layout{ID: id, Root: root, EnvDir: spec.Dir, Network: cfg.Network, Binds: binds,
		Hide: cfg.Hide, StateDir: cfg.StateDir, Limits: cfg.Limits}
	envPort := port
	if !cfg.Network {
		// The env has a network of its own: it listens on its declared
		// port there, and the keeper publishes it on the host's.
		envPort = spec.Port
		if envPort <= 0 {
			envPort = port
		}
	}
	st := &state{
		handle: handle{Port: port, Root: root},
		ID:     id, Env: spec.Env,
		Endpoint: "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		Labels:   spec.Labels, Started: time.Now().UTC(), Layout: lay,
		Command: spec.Command,
		Environ: hostenv.Environ(cfg.PassEnv, spec, hostenv.Vars{Port: envPort, ID: id, Home: sbWork, Tmp: sbTmp}),
	}
	// The state file comes first: a plugin killed from here on leaves a
	// record by which the next one finds the folder and the keeper.
	k := &keeper{done: make(chan struct{})}
	p.mu.Lock()
	p.mine[id] = k
	p.mu.Unlock()
	abandon := func(err error) (sandbox.Sandbox, bool, error) {
		close(k.done)
		p.forget(st)
		return fail(err)
	}
	if err := writeState(cfg.StateDir, st); err != nil {
		return abandon(err)
	}
	err = os.Mkdir(root, 0o700)
	for _, sub := range []string{"work", "tmp", "run"} {
		err = errors.Join(err, os.Mkdir(filepath.Join(root, sub), 0o700))
	}
	logFile, err2 := hostenv.OpenLog(filepath.Join(root, "env.log"))
	p.watchLogs()
	if err = errors.Join(err, err2); err != nil {
		return abandon(fmt.Errorf("making its folder: %w", err))
	}
	defer logFile.Close() // the keeper has its own descriptor
	argv, err := p.keeperArgs(st, cfg, envPort)
	if err != nil {
		return abandon(err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = st.Environ
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// A session of its own: the keeper and its sandbox stay when the host
	// stops this plugin process (and its process group) for a hot swap.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return abandon(fmt.Errorf("starting its keeper: %w", err))
	}
	k.cmd = cmd
	go func() {
		k.err = cmd.Wait()
		close(k.done)
	}()
	st.Keeper = cmd.Process.Pid
	st.KeeperStart, _ = procStart(st.Keeper)
	failStarted := func(why error) (sandbox.Sandbox, bool, error) {
		if err := p.stop(context.Background(), st, time.Duration(cfg.Grace)); err != nil {
			p.log.Error("stopping an env that failed to start", "id", id, "error", err)
		}
		<-k.done
		out := hostenv.FileTail(filepath.Join(root, "env.log"), 2048)
		p.forget(st)
		lost := strings.Contains(out, "address already in use")
		return sandbox.Sandbox{}, lost, fmt.Errorf("%s: env %q (%q): %w%s", pluginID, spec.Env, spec.Command, why, hostenv.OutputTail(out))
	}
	if err := writeState(cfg.StateDir, st); err != nil {
		return failStarted(err)
	}
	began := time.Now()
	if err := p.waitReady(ctx, st, k); err != nil {
		return failStarted(err)
	}
	if !st.learnInit() {
		return failStarted(errors.New("bwrap wrote no info about its sandbox"))
	}
	if err := writeState(cfg.StateDir, st); err != nil {
		return failStarted(err)
	}
	p.log.Info("deployed", "id", id, "env", spec.Env, "endpoint", st.Endpoint, "network", cfg.Network,
		"keeper", st.Keeper, "listening_after", time.Since(began).Round(time.Microsecond).String())
	return st.sandbox(), false, nil
}

// keeperArgs is the keeper's command line: keep, then (through limit,
// when there are limits) bwrap, then the env's command (through the relay,
// when the network is off).
func (p *plugin) keeperArgs(st *state, cfg Config, envPort int) ([]string, error) {
	bwrap, err := exec.LookPath(cfg.Bwrap)
	if err != nil {
		return nil, err
	}
	box, err := st.Layout.bwrapArgs(true, p.exe)
	if err != nil {
		return nil, err
	}
	argv := []string{p.exe, "keep", "--info", infoPath(st.Root)}
	if !cfg.Network {
		argv = append(argv, "--listen", net.JoinHostPort("127.0.0.1", strconv.Itoa(st.Port)), "--relay", relaySocket(st.Root))
	}
	argv = append(argv, "--")
	if lim := cfg.Limits.limitArgs(); len(lim) > 0 {
		argv = append(append(append(argv, p.exe, "limit"), lim...), "--")
	}
	argv = append(append(argv, bwrap, "--info-fd", "3"), box...)
	if !cfg.Network {
		argv = append(argv, sbRelay, "relay", "--sock", filepath.Join(sbRun, "relay.sock"), "--port", strconv.Itoa(envPort), "--")
	}
	return append(argv, hostenv.ResolveCommand(st.Layout.EnvDir, st.Command)...), nil
}

// waitReady returns once the env accepts connections (through the relay,
// when the network is off), fails as soon as the keeper exits, or when ctx
// ends.
func (p *plugin) waitReady(ctx context.Context, st *state, k *keeper) error {
	probe := hostenv.DialProbe(st.Port)
	if !st.Layout.Network {
		probe = func(context.Context) error {
			c, err := dialRelay(relaySocket(st.Root), time.Second)
			if err == nil {
				c.Close()
			}
			return err
		}
	}
	return hostenv.WaitReady(ctx, st.Port, k.done, func() error { return k.err }, probe)
}

func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "bwrap-" + hex.EncodeToString(b[:])
}

// watchLogs starts, once per plugin process, the watcher that keeps every
// sandbox's env.log under log_max_mb (those of earlier plugin processes
// too: their keepers run on).
func (p *plugin) watchLogs() {
	p.logs.Do(func() {
		go hostenv.WatchLogs(context.Background(), func() string { return filepath.Join(p.config().StateDir, "*", "env.log") },
			func() int64 { return p.config().LogMaxMB << 20 }, p.log)
	})
}
