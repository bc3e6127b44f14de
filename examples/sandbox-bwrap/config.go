package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentenv/agentenv/sdk/config"
	"github.com/agentenv/agentenv/sdk/sandbox/hostenv"
)

// configSchema is what the host checks a configuration against before
// Configure sees it. TestConfigSchemaMatchesStruct keeps it and Config in
// step.
const configSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "additionalProperties": false,
  "properties": {
    "network": {
      "type": "boolean",
      "description": "true (default): envs share this machine's network, so they can reach it and the internet. false: each env gets its own network namespace with only loopback; the plugin relays its port."
    },
    "binds": {
      "type": "array",
      "items": {"type": "string", "pattern": "^/"},
      "description": "Extra read-only binds, each \"/host/path\" or \"/host/path:/path/in/sandbox\"."
    },
    "hide": {
      "type": "array",
      "items": {"type": "string", "pattern": "^/"},
      "description": "Paths the env must not see: a folder is covered by an empty read-only tmpfs, a file by /dev/null. The plugin's state dir is always hidden."
    },
    "limits": {
      "type": "object",
      "additionalProperties": false,
      "description": "Resource limits (setrlimit) on every process of a sandbox; 0 = no limit.",
      "properties": {
        "open_files": {"type": "integer", "minimum": 0},
        "file_size_mb": {"type": "integer", "minimum": 0},
        "cpu_seconds": {"type": "integer", "minimum": 0},
        "address_space_mb": {"type": "integer", "minimum": 0},
        "processes": {"type": "integer", "minimum": 0}
      }
    },
    "state_dir": {
      "type": "string",
      "description": "Folder of the sandboxes' state files and folders (default: <user cache dir>/agentenv/bwrap)."
    },
    "bwrap": {
      "type": "string",
      "description": "The bwrap program (default: bwrap, looked up on PATH)."
    },
    "grace": {
      "type": "string",
      "description": "How long Terminate waits after SIGTERM before SIGKILL, as a Go duration (default 5s)."
    },
    "ready_timeout": {
      "type": "string",
      "description": "How long Deploy waits for the env to listen when the caller sets no deadline (default 60s)."
    },
    "build_timeout": {
      "type": "string",
      "description": "How long an env's build command may run (default 10m)."
    },
    "pass_env": {
      "type": "array",
      "items": {"type": "string"},
      "description": "Names of this process's environment variables passed to envs (PATH always is)."
    },
    "log_max_mb": {
      "type": "integer",
      "minimum": 0,
      "description": "Most an env's output log (env.log in its folder) holds: past it the log is cut to its tail (default 16; 0 turns the cap off)."
    }
  }
}`

// Config is the plugin's configuration; its keys are the schema's.
type Config struct {
	Network      bool            `json:"network"`
	Binds        []string        `json:"binds"`
	Hide         []string        `json:"hide"`
	Limits       Limits          `json:"limits"`
	StateDir     string          `json:"state_dir"`
	Bwrap        string          `json:"bwrap"`
	Grace        config.Duration `json:"grace"`
	ReadyTimeout config.Duration `json:"ready_timeout"`
	BuildTimeout config.Duration `json:"build_timeout"`
	PassEnv      []string        `json:"pass_env"`
	LogMaxMB     int64           `json:"log_max_mb"`
}

// Limits are setrlimit limits on every process of a sandbox; 0 = none.
type Limits struct {
	OpenFiles      uint64 `json:"open_files"`       // RLIMIT_NOFILE, per process
	FileSizeMB     uint64 `json:"file_size_mb"`     // RLIMIT_FSIZE: the largest file a process may write
	CPUSeconds     uint64 `json:"cpu_seconds"`      // RLIMIT_CPU, per process
	AddressSpaceMB uint64 `json:"address_space_mb"` // RLIMIT_AS: virtual memory, not resident memory
	// Processes is RLIMIT_NPROC. The kernel counts every process of the
	// user running the plugin, not only the sandbox's, and exempts root.
	Processes uint64 `json:"processes"`
}

// defaultConfig is the configuration before Configure.
func defaultConfig() Config {
	return Config{
		Network:      true,
		Limits:       Limits{OpenFiles: 4096, FileSizeMB: 1024},
		StateDir:     defaultStateDir(),
		Bwrap:        "bwrap",
		Grace:        config.Duration(5 * time.Second),
		ReadyTimeout: config.Duration(60 * time.Second),
		BuildTimeout: config.Duration(10 * time.Minute),
		LogMaxMB:     hostenv.DefaultLogMax >> 20,
	}
}

func defaultStateDir() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	return filepath.Join(dir, "agentenv", "bwrap")
}

// Configure applies a configuration. The host has checked it against the
// schema; it is decoded strictly again here for callers that did not.
func (p *plugin) Configure(_ context.Context, raw json.RawMessage) error {
	cfg := defaultConfig()
	if err := config.Decode(pluginID, raw, &cfg); err != nil {
		return err
	}
	if err := cfg.check(); err != nil {
		return fmt.Errorf("%s config: %w", pluginID, err)
	}
	p.mu.Lock()
	p.cfg = cfg
	p.mu.Unlock()
	return nil
}

// check validates cfg and makes its paths absolute.
func (cfg *Config) check() error {
	if cfg.StateDir == "" {
		return fmt.Errorf("state_dir is empty")
	}
	abs, err := filepath.Abs(cfg.StateDir)
	if err != nil {
		return fmt.Errorf("state_dir %q: %w", cfg.StateDir, err)
	}
	cfg.StateDir = abs
	// The relay's socket lives in the state dir, and a unix socket path
	// has at most 107 bytes.
	if n := len(relaySocket(sandboxRoot(abs, newID()))); n > maxSocketPath {
		return fmt.Errorf("state_dir %q is too long: sandboxes' socket paths would be %d bytes, over the %d a unix socket allows; pick a shorter folder", abs, n, maxSocketPath)
	}
	if cfg.ReadyTimeout == 0 || cfg.BuildTimeout == 0 {
		return fmt.Errorf("ready_timeout and build_timeout must be positive")
	}
	for _, name := range cfg.PassEnv {
		if name == "" || strings.ContainsAny(name, "=\x00") {
			return fmt.Errorf("pass_env entry %q is not a variable name", name)
		}
	}
	for _, b := range cfg.Binds {
		if _, err := parseBind(b); err != nil {
			return fmt.Errorf("binds: %w", err)
		}
	}
	for _, h := range cfg.Hide {
		if !filepath.IsAbs(h) {
			return fmt.Errorf("hide: %q is not an absolute path", h)
		}
	}
	if cfg.Bwrap == "" {
		return fmt.Errorf("bwrap is empty; leave it out to use bwrap from PATH")
	}
	return nil
}

// bind is one extra read-only bind.
type bind struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// parseBind reads "/host/path" or "/host/path:/sandbox/path". The host path
// must exist; the sandbox path must not be one the sandbox sets up itself.
func parseBind(s string) (bind, error) {
	from, to, ok := strings.Cut(s, ":")
	if !ok {
		to = from
	}
	if !filepath.IsAbs(from) || !filepath.IsAbs(to) {
		return bind{}, fmt.Errorf("%q: want /host/path or /host/path:/path/in/sandbox, both absolute", s)
	}
	from, to = filepath.Clean(from), filepath.Clean(to)
	if _, err := os.Stat(from); err != nil {
		return bind{}, fmt.Errorf("%q: %w", s, err)
	}
	for _, own := range reservedPaths {
		if to == "/" || to == own || strings.HasPrefix(to, own+"/") {
			return bind{}, fmt.Errorf("%q: %s is set up by the sandbox itself (reserved: /, %s)", s, to, strings.Join(reservedPaths, ", "))
		}
	}
	// The sandbox's root is the host's, read-only: a mount point can be
	// made only at a new top-level folder (/data), or be a path that exists.
	if _, err := os.Lstat(to); err != nil {
		top := "/" + strings.SplitN(strings.TrimPrefix(to, "/"), "/", 2)[0]
		if _, err := os.Lstat(top); err == nil && top != to {
			return bind{}, fmt.Errorf("%q: %s does not exist, and cannot be made inside the read-only %s; bind to an existing path or to a new top-level folder such as /data", s, to, top)
		}
	}
	return bind{From: from, To: to}, nil
}
