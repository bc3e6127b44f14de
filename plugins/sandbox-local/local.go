// Package local is the sandbox plugin for this machine. In process mode (an
// env that declares a command) it runs the env as a plain process on a free
// loopback port, in its own process group and temp dir. Every sandbox has a
// state file, written before the env starts, so a later plugin process can
// list and terminate what an earlier one started, even one killed
// mid-deploy. Docker mode (image-only envs) is not built yet.
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
}

// DefaultConfig is the configuration before Configure.
func DefaultConfig() Config {
	return Config{StateDir: defaultStateDir(), Grace: config.Duration(5 * time.Second),
		ReadyTimeout: config.Duration(60 * time.Second), BuildTimeout: config.Duration(10 * time.Minute)}
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

	mu    sync.Mutex
	cfg   Config
	procs map[string]*proc // sandboxes this process started, by id
}

var _ sandbox.Plugin = (*Plugin)(nil)
var _ sdk.Configurer = (*Plugin)(nil)

// New returns the local sandbox with the default configuration.
func New() *Plugin {
	return &Plugin{
		log:   defaultLogger(),
		cfg:   DefaultConfig(),
		procs: map[string]*proc{},
	}
}

// defaultLogger writes JSON to stderr, which the plugin host reads into its
// own log; AGENTENV_LOG_LEVEL sets the level (default info).
func defaultLogger() hclog.Logger {
	level := hclog.LevelFromString(os.Getenv("AGENTENV_LOG_LEVEL"))
	if level == hclog.NoLevel {
		level = hclog.Info
	}
	return hclog.New(&hclog.LoggerOptions{Name: "sandbox-local", Output: os.Stderr, JSONFormat: true, Level: level})
}

// SetLogger replaces the plugin's logger.
func (p *Plugin) SetLogger(l hclog.Logger) { p.log = l }

// Info describes the plugin.
func (p *Plugin) Info() sdk.Info {
	return sdk.Info{Name: "local", Kind: sdk.KindSandbox, Version: Version, ConfigSchema: json.RawMessage(configSchema)}
}

// Configure applies a configuration document (already checked against the
// schema by the host; checked again here for direct callers).
func (p *Plugin) Configure(_ context.Context, raw json.RawMessage) error {
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
	p.mu.Lock()
	p.cfg = cfg
	p.mu.Unlock()
	return nil
}

func (p *Plugin) config() Config {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cfg
}

// Deploy runs spec's env. Only process mode exists so far: spec.Command
// must be set.
func (p *Plugin) Deploy(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	if err := runnable(spec); err != nil {
		return sandbox.Sandbox{}, err
	}
	return p.deployProcess(ctx, spec)
}

// runnable says why this sandbox cannot run spec's env, if it cannot.
// Prepare checks it too, so serve refuses such an env at start.
func runnable(spec sandbox.Spec) error {
	if len(spec.Command) > 0 {
		return nil
	}
	if spec.Image != "" {
		return fmt.Errorf("sandbox-local: env %q has only an image (%s); this version runs envs as processes only, so give the env a command in env.toml", spec.Env, spec.Image)
	}
	return fmt.Errorf("sandbox-local: env %q has no command to run", spec.Env)
}

// List returns the live sandboxes whose labels include labels. Sandboxes
// whose processes are gone are cleaned up on the way, and a sandbox whose
// plugin was killed before it recorded the env's pid is found by its id in
// the env's environment.
func (p *Plugin) List(_ context.Context, labels map[string]string) ([]sandbox.Sandbox, error) {
	cfg := p.config()
	states, err := readStates(cfg.StateDir)
	if err != nil {
		return nil, err
	}
	var out []sandbox.Sandbox
	for _, st := range states {
		if st.PID == 0 && !p.adopt(st) {
			continue
		}
		if !st.alive() {
			p.log.Debug("removing a sandbox that is gone", "id", st.ID, "pid", st.PID)
			p.forget(st)
			continue
		}
		if !labelsMatch(st.Labels, labels) {
			continue
		}
		out = append(out, st.sandbox())
	}
	return out, nil
}

// adopt completes the state of a sandbox recorded before its env started
// (PID 0): true when its env runs, false when it never started (its files
// are removed once no deploy can still be starting it).
func (p *Plugin) adopt(st *state) bool {
	p.mu.Lock()
	_, ours := p.procs[st.ID]
	p.mu.Unlock()
	if ours {
		return false // being deployed by this process right now
	}
	if pid, ok := findByVar(sandbox.EnvSandboxID, st.ID); ok {
		st.PID, st.PGID = pid, pid
		st.ProcStart, _ = procStart(pid)
		return true
	}
	if !ownerAlive(st) || time.Since(st.Started) > time.Duration(p.config().ReadyTimeout) {
		p.forget(st) // a deploy cut short before its env started
	}
	return false
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
	f, ok := procStat(st.Owner)
	if !ok || f[0][0] == 'Z' { // gone, or a zombie nobody reaped yet
		return false
	}
	start, err := strconv.ParseUint(string(f[19]), 10, 64)
	return err == nil && (st.OwnerStart == 0 || start == st.OwnerStart)
}

func labelsMatch(have, want map[string]string) bool {
	for k, v := range want {
		if got, ok := have[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// Terminate stops a sandbox: SIGTERM to its process group, SIGKILL after
// the grace period, then removes its temp dir and state file. The handle is
// enough: it works on sandboxes of an earlier plugin process too, even when
// their state file is gone.
func (p *Plugin) Terminate(ctx context.Context, sb sandbox.Sandbox) error {
	cfg := p.config()
	st, fileErr := readState(cfg.StateDir, sb.ID)
	if fileErr != nil {
		var ok bool
		if st, ok = fromHandle(sb); !ok || !st.alive() {
			return fileErr // ErrNotFound, naming the id
		}
	} else if st.PID == 0 && !p.adopt(st) {
		p.forget(st)
		return nil // recorded, but its env never started
	}
	p.mu.Lock()
	pr := p.procs[sb.ID]
	p.mu.Unlock()
	if err := stopGroup(ctx, st, pr, time.Duration(cfg.Grace), p.log); err != nil {
		return fmt.Errorf("sandbox-local: terminating %s: %w", sb.ID, err)
	}
	p.forget(st)
	return nil
}

// forget removes every trace of a sandbox that has stopped.
func (p *Plugin) forget(st *state) {
	cfg := p.config()
	if st.Root != "" && strings.HasPrefix(filepath.Base(st.Root), rootPrefix) {
		if err := os.RemoveAll(st.Root); err != nil {
			p.log.Warn("removing sandbox dir", "id", st.ID, "dir", st.Root, "error", err)
		}
	}
	if err := removeState(cfg.StateDir, st.ID); err != nil {
		p.log.Warn("removing sandbox state", "id", st.ID, "error", err)
	}
	if st.Port != 0 {
		releasePort(cfg.StateDir, st.Port, st.ID)
	}
	p.mu.Lock()
	delete(p.procs, st.ID)
	p.mu.Unlock()
}
