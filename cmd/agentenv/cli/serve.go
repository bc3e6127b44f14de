package cli

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"

	"github.com/agentenv/agentenv/core/episode"
	"github.com/agentenv/agentenv/core/pluginhost"
	"github.com/agentenv/agentenv/core/runtime"
	"github.com/agentenv/agentenv/core/serve"
	"github.com/agentenv/agentenv/core/server"
	"github.com/agentenv/agentenv/core/transcript"
)

func newServeCmd(version string, env Env) *cobra.Command {
	o := defaultServeOptions()
	var configFile string
	var sandboxConfig []string
	cmd := &cobra.Command{
		Use:   "serve BUNDLE",
		Short: "Serve a bundle's tasks as an OpenEnv environment",
		Long: `serve loads a bundle and serves every task in it as an OpenEnv environment:
trainers open a WebSocket session on /ws, reset a task, and step it with the
model's replies. Each episode's env runs in a fresh sandbox (by default the
local one: a plain process when the env declares a command, no Docker needed).

Flags override the [serve] table of --config. See docs/serving.md.`,
		Example: `  agentenv serve examples/gridsim
  AGENTENV_TOKEN=$(openssl rand -hex 16) agentenv serve examples/gridsim --token-var AGENTENV_TOKEN --addr 0.0.0.0:8200`,
		Args: oneArg("the bundle folder to serve", "agentenv serve examples/gridsim"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if configFile != "" {
				fileSandboxConfig, err := applyServeConfig(configFile, cmd.Flags())
				if err != nil {
					return err
				}
				o.SandboxConfig = fileSandboxConfig
			}
			extra, err := parseSandboxConfig(sandboxConfig)
			if err != nil {
				return err
			}
			for k, v := range extra {
				if o.SandboxConfig == nil {
					o.SandboxConfig = map[string]any{}
				}
				o.SandboxConfig[k] = v
			}
			sigs := make(chan os.Signal, 2)
			signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
			defer signal.Stop(sigs)
			return runServe(args[0], version, o, env, cmd.ErrOrStderr(), sigs)
		},
	}
	f := cmd.Flags()
	o.addFlags(f)
	f.StringArrayVar(&sandboxConfig, "sandbox-config", nil, "sandbox setting as key=value (value parsed as JSON when it is JSON), or a .json/.toml file of settings; repeatable")
	f.StringVar(&configFile, "config", "", "TOML file whose [serve] table sets any of these flags")
	return cmd
}

func newLogger(o serveOptions, stderr io.Writer) hclog.Logger {
	level := hclog.LevelFromString(o.LogLevel)
	if level == hclog.NoLevel {
		level = hclog.Info
	}
	color := hclog.ColorOff
	if !o.LogJSON && isTerminal(stderr) {
		color = hclog.AutoColor
	}
	return hclog.New(&hclog.LoggerOptions{Name: "agentenv", Level: level, Output: stderr, JSONFormat: o.LogJSON, Color: color})
}

// runServe checks o, takes the token out of the environment, listens,
// and serves until a signal on sigs (serve.Run): the first drains and
// returns nil, a second exits the process at once.
func runServe(dir, version string, o serveOptions, env Env, stderr io.Writer, sigs <-chan os.Signal) error {
	log := newLogger(o, stderr)
	if o.MaxConcurrentEnvs < 1 {
		return fmt.Errorf("--max-concurrent-envs must be at least 1, got %d", o.MaxConcurrentEnvs)
	}
	if err := o.Limits.check(); err != nil {
		return err
	}
	if o.DeployTimeout <= 0 {
		return fmt.Errorf("--deploy-timeout must be more than 0, got %s", o.DeployTimeout)
	}
	if o.Warm < 0 {
		return fmt.Errorf("--warm must be 0 or more, got %d", o.Warm)
	}
	token := ""
	if o.TokenVar != "" {
		token = env.Getenv(o.TokenVar)
		if token == "" {
			return tokenVarError(o.TokenVar)
		}
		if w := shortTokenWarning(token); w != "" {
			log.Warn(w)
		}
		// No child (env builds, plugins, envs) inherits it, and it is
		// blanked in /proc/<pid>/environ too (environ_linux.go).
		if err := scrubEnv(o.TokenVar); err != nil {
			log.Warn("the token is out of the environment children inherit, but stays readable in this process's /proc/<pid>/environ", "error", err)
		}
	}
	transcripts, err := o.transcripts()
	if err != nil {
		return err
	}
	sandboxCfg, err := jsonConfig(o.SandboxConfig)
	if err != nil {
		return fmt.Errorf("--sandbox-config: %w", err)
	}
	if w := threadWarning(o.Sandbox, o.MaxConcurrentEnvs); w != "" {
		log.Warn(w)
	}
	ln, err := net.Listen("tcp", o.Addr)
	if err != nil {
		return listenError(o.Addr, err)
	}
	err = serve.Run(dir, serve.Options{
		Listener: ln, Addr: o.Addr, Version: version, Logger: log, ShutdownTimeout: o.ShutdownTimeout,
		Runtime: runtime.Options{
			Sandbox: o.Sandbox, SandboxConfig: sandboxCfg, Reward: o.Reward, ToolFormat: o.ToolFormat,
			Plugins: pluginhost.Options{ReloadOnSIGHUP: true, IsolateToolFormats: o.IsolateToolFormats},
			Tune: func(c *episode.Config) {
				c.Limits = o.Limits.episodeLimits()
				c.DeployTimeout = o.DeployTimeout
			},
			Warm: o.Warm, WarmLimit: o.MaxConcurrentEnvs,
		},
		Server: server.Options{
			Token:             token,
			MaxConcurrentEnvs: o.MaxConcurrentEnvs,
			IdleTimeout:       o.IdleTimeout,
			HTTP:              o.Limits.httpLimits(),
			MaxQueuedFrames:   o.Limits.MaxQueuedMessages,
			ErrorDetail:       o.ErrorDetail,
		},
		Transcripts: transcripts,
		NoUI:        !o.UI,
	}, sigs)
	if errors.Is(err, serve.ErrAbandoned) {
		os.Exit(1) // logged; the teardown still running must not hold the exit
	}
	var dirErr *transcript.DirError
	if errors.As(err, &dirErr) {
		return recordDirError(o.Record, dirErr)
	}
	if err != nil {
		return sandboxConfigHint(err, o.SandboxConfig)
	}
	return nil
}

// transcripts are where --record sends ended episodes (serve.Run keeps
// the last ones in memory for the live page itself).
func (o serveOptions) transcripts() (serve.Transcripts, error) {
	switch {
	case o.RecordFileMB < 1:
		return serve.Transcripts{}, fmt.Errorf("--record-file-mb must be at least 1, got %d", o.RecordFileMB)
	case o.RecordQueue < 1:
		return serve.Transcripts{}, fmt.Errorf("--record-queue must be at least 1, got %d", o.RecordQueue)
	case o.Record == "":
		return serve.Transcripts{}, nil
	}
	return serve.Transcripts{Dir: o.Record, MaxFileBytes: int64(o.RecordFileMB) << 20, Queue: o.RecordQueue}, nil
}

// recordDirError says what to do about a --record directory serve cannot
// use: another one, or (in use) another one or the other server stopped.
func recordDirError(dir string, err *transcript.DirError) error {
	if err.InUse {
		return fmt.Errorf("--record %s: %w; give this server a directory of its own (--record %s-2), or stop the other server first", dir, err, filepath.Clean(dir))
	}
	return fmt.Errorf("--record %s: %w; give a directory agentenv can write to, or leave --record out", dir, err)
}
