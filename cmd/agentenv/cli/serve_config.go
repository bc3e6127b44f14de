package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2"
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
	LogJSON           bool
	LogLevel          string
	Limits            serveLimits
	Warm              int
	// ErrorDetail sends clients DEPLOY_FAILED's full detail (server
	// paths, env output); for a server only its operator uses.
	ErrorDetail bool
}

func defaultServeOptions() serveOptions {
	return serveOptions{
		Addr:              "127.0.0.1:8200",
		Sandbox:           "local",
		ToolFormat:        "hermes",
		MaxConcurrentEnvs: 64,
		IdleTimeout:       30 * time.Minute,
		LogLevel:          "info",
		Limits:            defaultServeLimits(),
	}
}

// serveFile is the [serve] table of a config file.
type serveFile struct {
	Serve struct {
		Addr              *string        `toml:"addr"`
		Sandbox           *string        `toml:"sandbox"`
		SandboxConfig     map[string]any `toml:"sandbox_config"`
		Reward            *string        `toml:"reward"`
		ToolFormat        *string        `toml:"tool_format"`
		MaxConcurrentEnvs *int           `toml:"max_concurrent_envs"`
		TokenVar          *string        `toml:"token_var"`
		IdleTimeout       *string        `toml:"idle_timeout"`
		LogJSON           *bool          `toml:"log_json"`
		LogLevel          *string        `toml:"log_level"`
		Warm              *int           `toml:"warm"`
		ErrorDetail       *bool          `toml:"error_detail"`
	} `toml:"serve"`
}

// readServeConfig reads the [serve] table of a TOML file over the
// defaults. Unknown keys are errors; other tables are left to other
// commands.
func readServeConfig(path string) (serveOptions, error) {
	o := defaultServeOptions()
	raw, err := os.ReadFile(path)
	if err != nil {
		return o, fmt.Errorf("--config: %w", err)
	}
	var top map[string]any
	if err := toml.Unmarshal(raw, &top); err != nil {
		return o, fmt.Errorf("--config %s: %w", path, tomlErr(err))
	}
	serveTable, _ := top["serve"].(map[string]any)
	known := map[string]bool{"addr": true, "sandbox": true, "sandbox_config": true, "reward": true, "tool_format": true,
		"max_concurrent_envs": true, "token_var": true, "idle_timeout": true, "log_json": true, "log_level": true, "warm": true, "error_detail": true}
	for k := range serveTable {
		if !known[k] && !isLimitKey(k) {
			return o, fmt.Errorf("--config %s: [serve] has unknown key %q", path, k)
		}
	}
	var f serveFile
	if err := toml.Unmarshal(raw, &f); err != nil {
		return o, fmt.Errorf("--config %s: %w", path, tomlErr(err))
	}
	s := f.Serve
	set := func(dst *string, v *string) {
		if v != nil {
			*dst = *v
		}
	}
	set(&o.Addr, s.Addr)
	set(&o.Sandbox, s.Sandbox)
	set(&o.Reward, s.Reward)
	set(&o.ToolFormat, s.ToolFormat)
	set(&o.TokenVar, s.TokenVar)
	set(&o.LogLevel, s.LogLevel)
	o.SandboxConfig = s.SandboxConfig
	if s.MaxConcurrentEnvs != nil {
		o.MaxConcurrentEnvs = *s.MaxConcurrentEnvs
	}
	if s.LogJSON != nil {
		o.LogJSON = *s.LogJSON
	}
	if s.ErrorDetail != nil {
		o.ErrorDetail = *s.ErrorDetail
	}
	if err := o.Limits.readTable(serveTable); err != nil {
		return o, fmt.Errorf("--config %s: %w", path, err)
	}
	if s.Warm != nil {
		o.Warm = *s.Warm
	}
	if s.IdleTimeout != nil {
		d, err := time.ParseDuration(*s.IdleTimeout)
		if err != nil {
			return o, fmt.Errorf("--config %s: [serve] idle_timeout %q: want a duration like \"30m\"", path, *s.IdleTimeout)
		}
		o.IdleTimeout = d
	}
	return o, nil
}

func tomlErr(err error) error {
	var de *toml.DecodeError
	if errors.As(err, &de) {
		row, col := de.Position()
		return fmt.Errorf("line %d column %d: %w", row, col, err)
	}
	return err
}

// mergeServeOptions takes file's values except where a flag was given.
func mergeServeOptions(file, flags serveOptions, changed func(string) bool) serveOptions {
	o := file
	pick := map[string]func(){
		"addr":                func() { o.Addr = flags.Addr },
		"sandbox":             func() { o.Sandbox = flags.Sandbox },
		"reward":              func() { o.Reward = flags.Reward },
		"tool-format":         func() { o.ToolFormat = flags.ToolFormat },
		"max-concurrent-envs": func() { o.MaxConcurrentEnvs = flags.MaxConcurrentEnvs },
		"token-var":           func() { o.TokenVar = flags.TokenVar },
		"idle-timeout":        func() { o.IdleTimeout = flags.IdleTimeout },
		"log-json":            func() { o.LogJSON = flags.LogJSON },
		"log-level":           func() { o.LogLevel = flags.LogLevel },
		"warm":                func() { o.Warm = flags.Warm },
		"error-detail":        func() { o.ErrorDetail = flags.ErrorDetail },
	}
	for name, apply := range pick {
		if changed(name) {
			apply()
		}
	}
	o.Limits.merge(&flags.Limits, changed)
	return o
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
