package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/agentenv/agentenv/core/serve"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2"
	"github.com/spf13/pflag"

	"github.com/agentenv/agentenv/core/episode"
	"github.com/agentenv/agentenv/core/transcript"
)

// serveOptions are serve's settings, from flags and the [serve] table of
// --config.
type serveOptions struct {
	Addr              string
	Sandbox           string
	SandboxConfig     map[string]any
	Reward            string
	ToolFormat        string
	MaxConcurrentEnvs int
	TokenVar          string
	IdleTimeout       time.Duration
	ShutdownTimeout   time.Duration
	DeployTimeout     time.Duration
	LogJSON           bool
	LogLevel          string
	Limits            serveLimits
	Warm              int
	// ErrorDetail sends clients DEPLOY_FAILED's full detail (server
	// paths, env output); for a server only its operator uses.
	ErrorDetail bool
	// IsolateToolFormats runs the built-in tool formats as plugin
	// subprocesses rather than in the server's process.
	IsolateToolFormats bool
	// UI serves the live page at /ui.
	UI bool
	// Record is the transcript directory (--record); RecordFileMB and
	// RecordQueue bound its files and its write queue.
	Record       string
	RecordFileMB int
	RecordQueue  int
}

func defaultServeOptions() serveOptions {
	return serveOptions{
		Addr:              "127.0.0.1:8200",
		Sandbox:           "local",
		ToolFormat:        "hermes",
		MaxConcurrentEnvs: 64,
		IdleTimeout:       30 * time.Minute,
		ShutdownTimeout:   serve.DefaultShutdownTimeout,
		DeployTimeout:     episode.DefaultDeployTimeout,
		LogLevel:          "info",
		Limits:            defaultServeLimits(),
		RecordFileMB:      transcript.DefaultMaxFileBytes >> 20,
		RecordQueue:       transcript.DefaultQueue,
		UI:                true,
	}
}

// addFlags registers o's settings as serve's flags; each is also a key
// of the [serve] table of --config (applyServeConfig).
func (o *serveOptions) addFlags(f *pflag.FlagSet) {
	f.StringVar(&o.Addr, "addr", o.Addr, "address to listen on")
	f.StringVar(&o.Sandbox, "sandbox", o.Sandbox, "sandbox plugin: local, ecs (docs/ecs.md), k8s (docs/kubernetes.md), or any agentenv-sandbox-<name>")
	f.StringVar(&o.Reward, "reward", o.Reward, "reward for tasks with several scores: a reward plugin name (mean), or score:<step id>")
	f.StringVar(&o.ToolFormat, "tool-format", o.ToolFormat, "default tool-call format of replies (a reset may name another)")
	f.IntVar(&o.MaxConcurrentEnvs, "max-concurrent-envs", o.MaxConcurrentEnvs, "live episodes at most; further resets wait in a FIFO queue")
	f.IntVar(&o.Warm, "warm", o.Warm, "sandboxes per env kept deployed, ready and unused for resets to take (they count against --max-concurrent-envs)")
	f.StringVar(&o.TokenVar, "token-var", o.TokenVar, "environment variable holding the token every request but /health must carry (empty: no token)")
	f.DurationVar(&o.IdleTimeout, "idle-timeout", o.IdleTimeout, "close a session and its episode after this long without a reset or step (0: never)")
	f.DurationVar(&o.DeployTimeout, "deploy-timeout", o.DeployTimeout, "how long one env's deploy may take, from the sandbox's start through its MCP server answering and listing its tools; past it the reset fails DEPLOY_FAILED and nothing is left running. Raise it where the sandbox is slow to start many envs at once (a busy Kubernetes cluster, ECS placement)")
	f.DurationVar(&o.ShutdownTimeout, "shutdown-timeout", o.ShutdownTimeout, "after the first stop signal, how long draining sessions and tearing down live sandboxes may take (what is left then is reaped at the next start)")
	f.BoolVar(&o.LogJSON, "log-json", o.LogJSON, "log JSON lines instead of text")
	f.StringVar(&o.LogLevel, "log-level", o.LogLevel, "log level: trace, debug, info, warn, error")
	f.BoolVar(&o.ErrorDetail, "error-detail", o.ErrorDetail, "send clients the full detail of DEPLOY_FAILED (server paths, env command lines and output, which may print secrets); for a server only you use. Without it clients get the env and a short cause, and the log the detail")
	f.BoolVar(&o.IsolateToolFormats, "isolate-tool-formats", o.IsolateToolFormats, "run the built-in tool formats (hermes, qwen3_coder) as plugin subprocesses, as plugin binaries run, instead of in the server's process (docs/plugins.md); each parse then crosses a gRPC round trip")
	f.BoolVar(&o.UI, "ui", o.UI, "serve the live page at /ui (behind the token); --ui=false serves none and keeps no recent episodes in memory for it")
	f.StringVar(&o.Record, "record", o.Record, "append each ended episode's transcript (prompt, replies, calls, tool results, scores, outcome, phase times) as a JSON line to daily files in this directory; read them with agentenv transcripts (docs/transcripts.md)")
	f.IntVar(&o.RecordFileMB, "record-file-mb", o.RecordFileMB, "start the day's next transcript file once one would pass this many MiB")
	f.IntVar(&o.RecordQueue, "record-queue", o.RecordQueue, "transcripts waiting to be written at most; past it they are dropped and counted (agentenv_transcripts_dropped_total), so a step never waits on the disk")
	o.Limits.addFlags(f)
}

// notInServeTable are serve's flags the [serve] table does not set;
// sandbox_config is a table of its own there.
var notInServeTable = map[string]bool{"config": true, "help": true, "sandbox-config": true}

// applyServeConfig reads the [serve] table of the TOML file at path into
// the flags of f not given on the command line: its keys are the flags'
// names with '_' for '-', so every flag is a key and nothing is listed
// twice. It returns the sandbox_config table. An unknown key or a value
// of the wrong type is an error naming it; other tables are left to
// other commands.
func applyServeConfig(path string, f *pflag.FlagSet) (map[string]any, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--config: %w", err)
	}
	var top map[string]any
	if err := toml.Unmarshal(raw, &top); err != nil {
		return nil, fmt.Errorf("--config %s: %w", path, tomlErr(err))
	}
	table, ok := top["serve"].(map[string]any)
	if !ok && top["serve"] != nil {
		return nil, fmt.Errorf("--config %s: serve is not a table: write [serve] and its keys under it", path)
	}
	var sandboxConfig map[string]any
	for _, key := range slices.Sorted(maps.Keys(table)) {
		v := table[key]
		if key == "sandbox_config" {
			if sandboxConfig, ok = v.(map[string]any); !ok {
				return nil, fmt.Errorf("--config %s: [serve] sandbox_config: want a table of settings, like [serve.sandbox_config]", path)
			}
			continue
		}
		name := strings.ReplaceAll(key, "_", "-")
		fl := f.Lookup(name)
		if fl == nil || notInServeTable[name] || strings.Contains(key, "-") {
			return nil, fmt.Errorf("--config %s: [serve] has unknown key %q; the keys are %s (serve's flags, with _ for -)",
				path, key, strings.Join(serveTableKeys(f), ", "))
		}
		val, err := flagValue(key, fl.Value.Type(), v)
		if err != nil {
			return nil, fmt.Errorf("--config %s: %w", path, err)
		}
		if fl.Changed { // the command line wins
			continue
		}
		if err := fl.Value.Set(val); err != nil {
			return nil, fmt.Errorf("--config %s: [serve] %s %s: %w", path, key, tomlValue(v), err)
		}
	}
	return sandboxConfig, nil
}

// flagValue turns a TOML value into the text a flag of type typ parses,
// refusing a value of another type.
func flagValue(key, typ string, v any) (string, error) {
	switch typ {
	case "string":
		if s, ok := v.(string); ok {
			return s, nil
		}
		return "", fmt.Errorf("[serve] %s %s: want a string", key, tomlValue(v))
	case "int":
		if n, ok := v.(int64); ok {
			return strconv.FormatInt(n, 10), nil
		}
		return "", fmt.Errorf("[serve] %s: want a whole number, got %s", key, tomlValue(v))
	case "bool":
		if b, ok := v.(bool); ok {
			return strconv.FormatBool(b), nil
		}
		return "", fmt.Errorf("[serve] %s %s: want true or false", key, tomlValue(v))
	case "duration":
		if s, ok := v.(string); ok {
			if _, err := time.ParseDuration(s); err == nil {
				return s, nil
			}
		}
		return "", fmt.Errorf("[serve] %s %s: want a duration like \"30s\"", key, tomlValue(v))
	}
	return "", fmt.Errorf("[serve] %s: a --%s flag cannot be set from the file", key, strings.ReplaceAll(key, "_", "-"))
}

// tomlValue shows a value as the file wrote it: strings quoted.
func tomlValue(v any) string {
	if s, ok := v.(string); ok {
		return strconv.Quote(s)
	}
	return fmt.Sprint(v)
}

// serveTableKeys lists the keys the [serve] table may hold, sorted.
func serveTableKeys(f *pflag.FlagSet) []string {
	keys := []string{"sandbox_config"}
	f.VisitAll(func(fl *pflag.Flag) {
		if !notInServeTable[fl.Name] {
			keys = append(keys, strings.ReplaceAll(fl.Name, "-", "_"))
		}
	})
	slices.Sort(keys)
	return keys
}

func tomlErr(err error) error {
	var de *toml.DecodeError
	if errors.As(err, &de) {
		row, col := de.Position()
		return fmt.Errorf("line %d column %d: %w", row, col, err)
	}
	return err
}

// parseSandboxConfig reads --sandbox-config values: key=value (the value
// as JSON when it parses, else as a string) or a .json/.toml file holding
// an object of settings. Later values win.
func parseSandboxConfig(values []string) (map[string]any, error) {
	out := map[string]any{}
	for _, v := range values {
		if k, val, ok := strings.Cut(v, "="); ok && k != "" && !strings.ContainsAny(k, "/\\") {
			var parsed any
			if err := json.Unmarshal([]byte(val), &parsed); err == nil {
				out[k] = parsed
			} else {
				out[k] = val
			}
			continue
		}
		raw, err := os.ReadFile(v)
		if err != nil {
			return nil, fmt.Errorf("--sandbox-config %q: neither key=value nor a readable file: %w", v, err)
		}
		var m map[string]any
		switch strings.ToLower(filepath.Ext(v)) {
		case ".json":
			dec := json.NewDecoder(bytes.NewReader(raw))
			if err := dec.Decode(&m); err != nil {
				return nil, fmt.Errorf("--sandbox-config %s: %w", v, err)
			}
		case ".toml":
			if err := toml.Unmarshal(raw, &m); err != nil {
				return nil, fmt.Errorf("--sandbox-config %s: %w", v, tomlErr(err))
			}
		default:
			return nil, fmt.Errorf("--sandbox-config %s: want a .json or .toml file, or key=value", v)
		}
		if m == nil {
			return nil, fmt.Errorf("--sandbox-config %s: want an object of settings", v)
		}
		for k, val := range m {
			out[k] = val
		}
	}
	return out, nil
}

// jsonConfig encodes a plugin configuration; none is nil.
func jsonConfig(m map[string]any) (json.RawMessage, error) {
	if len(m) == 0 {
		return nil, nil
	}
	return json.Marshal(m)
}
