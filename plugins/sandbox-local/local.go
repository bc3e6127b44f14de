// Package local is the sandbox plugin for this machine. It runs each env
// in one of two modes (config key mode; auto picks per env from env.toml
// alone: a command runs as a process, only an image in Docker):
//
//   - Docker mode, for envs with an image: a container from the env's image
//     (built by Prepare from the env's folder when the tag is missing), on a
//     network of its own whose subnet comes from the plugin's address pool,
//     its port published on 127.0.0.1 only, with cpu, memory and pids
//     limits, no capabilities, no-new-privileges, an init process and a
//     read-only root. Every container and network carries the host's labels,
//     so List finds them whichever plugin process created them. A terminal
//     env (a Harbor task) is its image's own container running agentenv's
//     injected terminal binary instead of its entrypoint; a no-internet env
//     has its default route taken out before its deploy returns.
//   - Process mode, for envs with a command: a plain process on a free
//     loopback port, in its own process group and temp dir. Every sandbox
//     has a state file, written before the env starts, so a later plugin
//     process can list and terminate what an earlier one started, even one
//     killed mid-deploy.
package local

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/agentenv/agentenv/sdk"
	"github.com/agentenv/agentenv/sdk/config"
	"github.com/agentenv/agentenv/sdk/sandbox"
	"github.com/agentenv/agentenv/sdk/sandbox/hostenv"
)

// Version is the plugin's version.
const Version = "0.1.0"

const configSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "additionalProperties": false,
  "properties": {
    "state_dir": {
      "type": "string",
      "description": "Folder of the per-sandbox state files (default: <user cache dir>/agentenv/sandboxes)."
    },
    "grace": {
      "type": "string",
      "description": "How long Terminate waits after SIGTERM before SIGKILL, as a Go duration (default 5s)."
    },
    "ready_timeout": {
      "type": "string",
      "description": "How long Deploy waits for the env to listen on its port when the caller sets no deadline (default 60s)."
    },
    "build_timeout": {
      "type": "string",
      "description": "How long an env's build command may run, as a Go duration (default 10m)."
    },
    "pass_env": {
      "type": "array",
      "items": {"type": "string"},
      "description": "Names of this process's environment variables passed to envs (PATH always is)."
    },
    "mode": {
      "type": "string",
      "enum": ["auto", "docker", "process"],
      "description": "auto (default): an env that declares a command runs as a process, one with only an image in Docker; docker: every env in a container; process: every env as a process."
    },
    "docker_host": {
      "type": "string",
      "description": "The Docker engine's address, e.g. unix:///var/run/docker.sock (default: $DOCKER_HOST, else that socket)."
    },
    "subnet_base": {
      "type": "string",
      "description": "IPv4 prefix the per-sandbox networks' subnets are cut from (default 10.213.0.0/16)."
    },
    "subnet_size": {
      "type": "integer",
      "description": "Prefix length of each sandbox network's subnet (default 28: 4,096 networks in the default base)."
    },
    "pids_limit": {
      "type": "integer",
      "description": "Most processes a container may hold (default 512)."
    },
    "default_cpu": {
      "type": "number",
      "description": "Cores a container may use when env.toml sets no cpu (default 1)."
    },
    "default_memory_mb": {
      "type": "integer",
      "description": "Memory limit of a container when env.toml sets no memory_mb (default 1024)."
    },
    "tmpfs_mb": {
      "type": "integer",
      "description": "Size of the tmpfs mounted on /tmp in every container (default 64)."
    },
    "parallel_ops": {
      "type": "integer",
      "description": "Most container creations and removals run on the engine at once; more wait their turn (default 8)."
    },
    "parallel_builds": {
      "type": "integer",
      "description": "Most image builds run on the engine at once; more envs wait their turn, logging that they wait (default 2)."
    },
    "terminal_binary": {
      "type": "string",
      "description": "Path of agentenv's static terminal binary, injected into the containers of envs that run it (Harbor tasks) and used to take the route out of no-internet containers (default: found as agentenv finds it: $AGENTENV_TERMINAL_BINARY, then agentenv-terminal beside the agentenv binary or on the plugin path)."
    },
    "log_max_mb": {
      "type": "integer",
      "description": "Most an env's output log holds on disk: a process env's log is cut to its tail past it, a container's json-file log rotates in two files of half of it (default 16; 0 turns the cap off)."
    }
  }
}`

// Config is the plugin's configuration; its keys are the schema's.
type Config struct {
	StateDir     string          `json:"state_dir"`
	Grace        config.Duration `json:"grace"`
	ReadyTimeout config.Duration `json:"ready_timeout"`
	BuildTimeout config.Duration `json:"build_timeout"`
	PassEnv      []string        `json:"pass_env"`

	Mode            string  `json:"mode"`
	DockerHost      string  `json:"docker_host"`
	SubnetBase      string  `json:"subnet_base"`
	SubnetSize      int     `json:"subnet_size"`
	PidsLimit       int64   `json:"pids_limit"`
	DefaultCPU      float64 `json:"default_cpu"`
	DefaultMemoryMB int64   `json:"default_memory_mb"`
	TmpfsMB         int64   `json:"tmpfs_mb"`
	ParallelOps     int     `json:"parallel_ops"`
	ParallelBuilds  int     `json:"parallel_builds"`
	TerminalBinary  string  `json:"terminal_binary"`
	LogMaxMB        int64   `json:"log_max_mb"`
}

// DefaultConfig is the configuration before Configure.
func DefaultConfig() Config {
	return Config{StateDir: defaultStateDir(), Grace: config.Duration(5 * time.Second),
		ReadyTimeout: config.Duration(60 * time.Second), BuildTimeout: config.Duration(10 * time.Minute),
		Mode: ModeAuto, SubnetBase: "10.213.0.0/16", SubnetSize: 28, PidsLimit: 512,
		DefaultCPU: 1, DefaultMemoryMB: 1024, TmpfsMB: 64, ParallelOps: 8, ParallelBuilds: 2, LogMaxMB: hostenv.DefaultLogMax >> 20}
}

func defaultStateDir() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	return filepath.Join(dir, "agentenv", "sandboxes")
}

// Plugin is the local sandbox. Its methods are safe for concurrent use.
type Plugin struct {
	log hclog.Logger

	mu     sync.Mutex
	cfg    Config
	logs   sync.Once         // starts the watcher capping process envs' logs
	procs  map[string]*proc  // sandboxes this process started, by id
	docker *engine           // Docker mode under cfg
	modes  map[string]string // the mode each env runs in, decided once
	// terminal is the terminal binary findTerminal found, once it did.
	terminal string
	// listening learns how long each env command takes to listen, so a
	// deploy's readiness probes start near then.
	listening hostenv.ListenTimes
	// spareRoots, spareStates and sparePorts are the temp dirs, state
	// files and port reservations of torn-down envs, kept for later
	// deploys (spares.go).
	spareRoots, spareStates, sparePorts spares
}

var _ sandbox.Plugin = (*Plugin)(nil)
var _ sdk.Configurer = (*Plugin)(nil)
var _ sdk.Cleaner = (*Plugin)(nil)

// New returns the local sandbox with the default configuration.
func New() *Plugin {
	p := &Plugin{log: defaultLogger(), cfg: DefaultConfig(), procs: map[string]*proc{}, modes: map[string]string{},
		spareRoots: spares{prefix: sparePrefix}, spareStates: spares{prefix: spareFilePrefix}, sparePorts: spares{prefix: spareFilePrefix, makeFiles: true}}
	pool, _ := newSubnetPool(p.cfg.SubnetBase, p.cfg.SubnetSize)
	p.docker = newEngine("", pool, p.cfg.ParallelOps, p.cfg.ParallelBuilds, p.log)
	return p
}

// defaultLogger is the SDK's plugin logger: JSON on stderr, which the host
// shows under the plugin's name at the host's level (so no name of its own
// here, or the host would show it twice).
func defaultLogger() hclog.Logger { return sdk.Logger() }

// SetLogger replaces the plugin's logger.
func (p *Plugin) SetLogger(l hclog.Logger) {
	p.log = l
	p.engine().log = l
}

// Info describes the plugin.
func (p *Plugin) Info() sdk.Info {
	return sdk.Info{Name: "local", Kind: sdk.KindSandbox, Version: Version, ConfigSchema: json.RawMessage(configSchema)}
}

// Configure applies a configuration document (already checked against the
// schema by the host; checked again here for direct callers).
func (p *Plugin) Configure(ctx context.Context, raw json.RawMessage) error {
	cfg := DefaultConfig()
	if err := config.Decode("sandbox-local", raw, &cfg); err != nil {
		return err
	}
	if cfg.StateDir == "" {
		return fmt.Errorf("sandbox-local config: state_dir is empty")
	}
	abs, err := filepath.Abs(cfg.StateDir)
	if err != nil {
		return fmt.Errorf("sandbox-local config: state_dir %q: %w", cfg.StateDir, err)
	}
	cfg.StateDir = abs
	if cfg.ReadyTimeout == 0 || cfg.BuildTimeout == 0 {
		return fmt.Errorf("sandbox-local config: ready_timeout and build_timeout must be positive")
	}
	for _, name := range cfg.PassEnv {
		if name == "" || strings.ContainsAny(name, "=\x00") {
			return fmt.Errorf("sandbox-local config: pass_env entry %q is not a variable name", name)
		}
	}
	switch {
	case cfg.Mode != ModeAuto && cfg.Mode != ModeDocker && cfg.Mode != ModeProcess:
		return fmt.Errorf("sandbox-local config: mode %q: use auto, docker or process", cfg.Mode)
	case cfg.PidsLimit < 1 || cfg.DefaultCPU <= 0 || cfg.DefaultMemoryMB < 6 || cfg.TmpfsMB < 1 || cfg.ParallelOps < 1:
		return fmt.Errorf("sandbox-local config: pids_limit, default_cpu, tmpfs_mb and parallel_ops must be positive and default_memory_mb at least 6 (Docker's floor)")
	case cfg.ParallelBuilds < 1:
		return fmt.Errorf("sandbox-local config: parallel_builds %d: give the most image builds to run at once, 1 or more", cfg.ParallelBuilds)
	case cfg.LogMaxMB < 0:
		return fmt.Errorf("sandbox-local config: log_max_mb %d: give the most an env's log may hold in MiB, or 0 for no cap", cfg.LogMaxMB)
	}
	if cfg.TerminalBinary != "" {
		bin, err := checkTerminalBinary(cfg.TerminalBinary)
		if err != nil {
			return fmt.Errorf("sandbox-local config: terminal_binary: %w", err)
		}
		cfg.TerminalBinary = bin
	}
	pool, err := newSubnetPool(cfg.SubnetBase, cfg.SubnetSize)
	if err != nil {
		return fmt.Errorf("sandbox-local config: %w", err)
	}
	p.mu.Lock()
	old := p.docker
	p.cfg = cfg
	p.docker = newEngine(cfg.DockerHost, pool, cfg.ParallelOps, cfg.ParallelBuilds, p.log)
	p.modes = map[string]string{}
	p.terminal = ""
	p.mu.Unlock()
	old.close()
	p.announce(ctx)
	return nil
}

// engine is Docker mode under the current configuration.
func (p *Plugin) engine() *engine {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.docker
}

func (p *Plugin) config() Config {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cfg
}

// Deploy runs spec's env, in a container or as a process (see modeFor).
func (p *Plugin) Deploy(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	mode, err := p.envMode(ctx, spec)
	if err != nil {
		return sandbox.Sandbox{}, err
	}
	if mode == ModeDocker {
		return p.deployDocker(ctx, spec)
	}
	return p.deployProcess(ctx, spec)
}

// envMode is the mode spec's env runs in: decided at its first Prepare or
// Deploy and kept, so an engine that comes or goes in mode auto never
// splits one env's sandboxes (or its build) between modes.
func (p *Plugin) envMode(ctx context.Context, spec sandbox.Spec) (string, error) {
	key := spec.Env + "\x00" + spec.Dir + "\x00" + spec.Image
	p.mu.Lock()
	mode, ok := p.modes[key]
	p.mu.Unlock()
	if ok {
		return mode, nil
	}
	mode, err := p.modeFor(ctx, spec)
	if err != nil {
		return "", err
	}
	p.mu.Lock()
	if prev, ok := p.modes[key]; ok {
		mode = prev
	} else {
		p.modes[key] = mode
		why, other := modeWhy(p.cfg.Mode, mode, spec)
		args := []any{"env", spec.Env, "mode", mode, "image", spec.Image, "why", why}
		if other != "" {
			args = append(args, "other", other)
		}
		p.log.Info("env mode", args...)
	}
	p.mu.Unlock()
	return mode, nil
}

// List returns the live sandboxes whose labels include labels: the
// engine's containers and networks of this plugin (whenever the engine
// answers, whatever the mode), then the processes.
func (p *Plugin) List(ctx context.Context, labels map[string]string) ([]sandbox.Sandbox, error) {
	var out []sandbox.Sandbox
	cli, err := p.engineForList(ctx)
	if err != nil {
		return nil, err
	}
	if cli != nil {
		if out, err = p.listDocker(ctx, cli, labels); err != nil {
			return nil, err
		}
	}
	procs, err := p.listProcesses(labels)
	return append(out, procs...), err
}

// listProcesses returns the live process sandboxes whose labels include
// labels. Sandboxes whose processes are gone are cleaned up on the way.
// A state file holds no pid: this process's own envs are known in memory,
// the others are found by their ids in the envs' environments, in one
// scan of /proc for all of them.
func (p *Plugin) listProcesses(labels map[string]string) ([]sandbox.Sandbox, error) {
	cfg := p.config()
	states, err := readStates(cfg.StateDir)
	if err != nil {
		return nil, err
	}
	p.locate(states)
	p.reapSpares(cfg.StateDir)
	var out []sandbox.Sandbox
	for _, st := range states {
		if st.PID == 0 {
			continue // being deployed, or never started
		}
		if !st.alive() {
			p.log.Debug("removing a sandbox that is gone", "id", st.ID, "pid", st.PID)
			p.forget(st)
			continue
		}
		if !hostenv.LabelsMatch(st.Labels, labels) {
			continue
		}
		out = append(out, st.sandbox())
	}
	return out, nil
}

// locate fills in the pid of each state without one (a state file is
// written before its env starts, and not again): from memory for an env
// this process started, else by one scan of /proc for the rest. A state
// whose env never started keeps PID 0, and its files are removed once no
// deploy can still be starting it.
func (p *Plugin) locate(states []*state) {
	var scan map[string]bool
	p.mu.Lock()
	for _, st := range states {
		if st.PID != 0 {
			continue // recorded with its pid (an older version, or no /proc)
		}
		if pr, ours := p.procs[st.ID]; ours {
			if pr.pid != 0 {
				st.setPID(pr.pid, pr.start)
			}
			continue // else being deployed by this process right now
		}
		if scan == nil {
			scan = map[string]bool{}
		}
		scan[st.ID] = true
	}
	p.mu.Unlock()
	if len(scan) == 0 {
		return
	}
	found := findByIDs(sandbox.EnvSandboxID, scan)
	timeout := time.Duration(p.config().ReadyTimeout)
	for _, st := range states {
		if !scan[st.ID] {
			continue
		}
		if pid, ok := found[st.ID]; ok {
			start, _ := procStart(pid)
			st.setPID(pid, start)
		} else if !ownerAlive(st) || time.Since(st.Started) > timeout {
			p.forget(st) // a deploy cut short before its env started
		}
	}
}

// setPID records the env's leader: its own process group's.
func (st *state) setPID(pid int, start uint64) {
	st.PID, st.PGID, st.ProcStart = pid, pid, start
}

// ownerAlive reports whether the plugin process that recorded st may
// still be deploying it. This process's own deploys are in p.procs, so
// here "this process" means one that is not deploying it.
func ownerAlive(st *state) bool {
	if st.Owner == 0 {
		return true // recorded by an older version: wait for ready_timeout
	}
	if st.Owner == os.Getpid() {
		return false
	}
	return running(st.Owner, st.OwnerStart)
}

// running reports whether process pid runs and, when start is not 0,
// started then (a pid reused by a later process does not count). A zombie
// nobody reaped yet, as a plugin killed with its server stays, is gone.
func running(pid int, start uint64) bool {
	f, ok := procStat(pid)
	if !ok || f[0][0] == 'Z' {
		return false
	}
	now, err := strconv.ParseUint(string(f[19]), 10, 64)
	return err == nil && (start == 0 || now == start)
}

// Terminate stops a sandbox and removes every trace of it. A container is
// stopped (SIGTERM, SIGKILL after the grace period) and removed with its
// network. A process gets SIGTERM to its process group, SIGKILL after the
// grace period, then its temp dir and state file are removed. The handle
// is enough: it works on sandboxes of an earlier plugin process too, even
// when a process sandbox's state file is gone.
func (p *Plugin) Terminate(ctx context.Context, sb sandbox.Sandbox) error {
	if isDocker(sb.ID) {
		return p.terminateDocker(ctx, sb)
	}
	cfg := p.config()
	p.mu.Lock()
	pr := p.procs[sb.ID]
	p.mu.Unlock()
	st, ours := p.ownHandle(sb, pr)
	var fileErr error
	if !ours {
		st, fileErr = readState(cfg.StateDir, sb.ID)
	}
	if fileErr != nil {
		var ok bool
		if st, ok = fromHandle(sb); !ok || !st.alive() {
			return fileErr // ErrNotFound, naming the id
		}
	} else if st.PID == 0 && !p.pidOf(st, sb) {
		p.forget(st)
		return nil // recorded, but its env never started
	}
	if err := stopGroup(ctx, st, pr, time.Duration(cfg.Grace), p.log); err != nil {
		return fmt.Errorf("sandbox-local: terminating %s: %w", sb.ID, err)
	}
	p.forget(st)
	return nil
}

// ownHandle reads the handle of a live env this process started (pr, its
// leader's pid and start time matching the handle's): what Terminate needs
// of its state file, without reading the file. An env that has exited is
// left to the file, which another plugin process may have removed.
func (p *Plugin) ownHandle(sb sandbox.Sandbox, pr *proc) (*state, bool) {
	if pr == nil || pr.exited() {
		return nil, false
	}
	h, ok := fromHandle(sb)
	if !ok {
		return nil, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return h, pr.pid != 0 && h.PID == pr.pid && h.ProcStart == pr.start && h.Root != "" && h.Port != 0
}

// pidOf fills in the pid of a state file's env for Terminate: from memory
// when this process started it, else from the handle the deploy returned
// (its leader's start time tells it from a later process with its pid),
// else by a scan of /proc. False: the env never started.
func (p *Plugin) pidOf(st *state, sb sandbox.Sandbox) bool {
	if h, ok := fromHandle(sb); ok && h.Root == st.Root && h.Port == st.Port {
		p.mu.Lock()
		_, ours := p.procs[st.ID]
		p.mu.Unlock()
		if !ours { // this process's own are in memory, which locate reads
			st.handle = h.handle
			return true
		}
	}
	p.locate([]*state{st})
	return st.PID != 0
}

// forget removes every trace of a sandbox that has stopped.
func (p *Plugin) forget(st *state) {
	cfg := p.config()
	// Only the files of an env this process deployed are kept as spares:
	// those of another process's (a restart's reap) are deleted.
	p.mu.Lock()
	_, keep := p.procs[st.ID]
	p.mu.Unlock()
	if st.Root != "" && strings.HasPrefix(filepath.Base(st.Root), rootPrefix) && !(keep && p.recycleRoot(st.Root)) {
		if err := removeRoot(st.Root); err != nil {
			p.log.Warn("removing sandbox dir", "id", st.ID, "dir", st.Root, "error", err)
		}
	}
	if err := p.removeState(cfg.StateDir, st.ID, keep); err != nil {
		p.log.Warn("removing sandbox state", "id", st.ID, "error", err)
	}
	if st.Port != 0 {
		ports := p.ports(cfg.StateDir)
		if !keep {
			ports.Spares = nil
		}
		ports.Release(st.Port, st.ID)
	}
	p.mu.Lock()
	delete(p.procs, st.ID)
	p.mu.Unlock()
}
