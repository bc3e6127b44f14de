package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"

	"github.com/agentenv/agentenv/core/bundle"
	"github.com/agentenv/agentenv/core/episode"
	"github.com/agentenv/agentenv/core/pluginhost"
	"github.com/agentenv/agentenv/core/server"
	"github.com/agentenv/agentenv/sdk/reward"
	"github.com/agentenv/agentenv/sdk/toolformat"
)

// shutdownTimeout bounds the drain after SIGTERM: sessions told, every
// episode torn down.
const shutdownTimeout = 60 * time.Second

func init() {
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
				fileOpts, err := readServeConfig(configFile)
				if err != nil {
					return err
				}
				o = mergeServeOptions(fileOpts, o, cmd.Flags().Changed)
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
			return runServe(args[0], o, sigs)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Addr, "addr", o.Addr, "address to listen on")
	f.StringVar(&o.Sandbox, "sandbox", o.Sandbox, "sandbox plugin: local, or any agentenv-sandbox-<name>")
	f.StringArrayVar(&sandboxConfig, "sandbox-config", nil, "sandbox setting as key=value (value parsed as JSON when it is JSON), or a .json/.toml file of settings; repeatable")
	f.StringVar(&o.Reward, "reward", o.Reward, "reward for tasks with several scores: a reward plugin name (mean), or score:<step id>")
	f.StringVar(&o.ToolFormat, "tool-format", o.ToolFormat, "default tool-call format of replies (a reset may name another)")
	f.IntVar(&o.MaxConcurrentEnvs, "max-concurrent-envs", o.MaxConcurrentEnvs, "live episodes at most; further resets wait in a FIFO queue")
	f.StringVar(&o.TokenVar, "token-var", o.TokenVar, "environment variable holding the token every request but /health must carry (empty: no token)")
	f.DurationVar(&o.IdleTimeout, "idle-timeout", o.IdleTimeout, "close a session and its episode after this long without a reset or step (0: never)")
	f.StringVar(&configFile, "config", "", "TOML file whose [serve] table sets any of these flags")
	f.BoolVar(&o.LogJSON, "log-json", o.LogJSON, "log JSON lines instead of text")
	f.StringVar(&o.LogLevel, "log-level", o.LogLevel, "log level: trace, debug, info, warn, error")
	o.Limits.addFlags(f)
	rootCmd.AddCommand(cmd)
}

func newLogger(o serveOptions) hclog.Logger {
	level := hclog.LevelFromString(o.LogLevel)
	if level == hclog.NoLevel {
		level = hclog.Info
	}
	color := hclog.ColorOff
	if !o.LogJSON && isatty.IsTerminal(os.Stderr.Fd()) {
		color = hclog.AutoColor
	}
	return hclog.New(&hclog.LoggerOptions{Name: "agentenv", Level: level, Output: os.Stderr, JSONFormat: o.LogJSON, Color: color})
}

// runServe serves until a signal on sigs: the first drains and returns
// nil, a second exits the process at once.
func runServe(dir string, o serveOptions, sigs <-chan os.Signal) error {
	log := newLogger(o)
	if o.MaxConcurrentEnvs < 1 {
		return fmt.Errorf("--max-concurrent-envs must be at least 1, got %d", o.MaxConcurrentEnvs)
	}
	if err := o.Limits.check(); err != nil {
		return err
	}
	token := ""
	if o.TokenVar != "" {
		token = os.Getenv(o.TokenVar)
		if token == "" {
			return tokenVarError(o.TokenVar)
		}
		// No child (env builds, plugins, envs) inherits it, and it is
		// blanked in /proc/<pid>/environ too (environ_linux.go).
		if err := scrubEnv(o.TokenVar); err != nil {
			log.Warn("the token is out of the environment children inherit, but stays readable in this process's /proc/<pid>/environ", "error", err)
		}
	}
	// An absolute path keeps env commands and folders valid whatever
	// working directory a sandbox runs them from.
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("bundle %s: %w", dir, err)
	}
	b, err := bundle.Load(abs, bundle.Options{})
	if err != nil {
		return err
	}
	for _, w := range b.Warnings {
		log.Warn("bundle", "warning", w)
	}
	rewardPlugin, rewardStep := o.Reward, ""
	if id, ok := strings.CutPrefix(o.Reward, bundle.RewardScorePrefix); ok {
		rewardPlugin, rewardStep = "", id
	}
	// Refuse an unrewardable bundle before starting any process.
	if err := b.CheckReward(o.Reward); err != nil {
		return err
	}
	serverID, err := server.ServerID(b.Dir, o.Addr)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", o.Addr)
	if err != nil {
		return listenError(o.Addr, err)
	}
	defer ln.Close()

	host, err := pluginhost.New(pluginhost.Options{Logger: log, ReloadOnSIGHUP: true})
	if err != nil {
		return err
	}
	defer host.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sandboxCfg, err := jsonConfig(o.SandboxConfig)
	if err != nil {
		return fmt.Errorf("--sandbox-config: %w", err)
	}
	driver, err := host.Sandbox(ctx, o.Sandbox, sandboxCfg)
	if err != nil {
		return sandboxConfigHint(fmt.Errorf("sandbox %q: %w", o.Sandbox, err), o.SandboxConfig)
	}
	if n, err := server.Reap(ctx, driver, serverID); err != nil {
		log.Warn("could not reap every sandbox an earlier run left", "server_id", serverID, "reaped", n, "error", err)
	} else if n > 0 {
		log.Info("reaped sandboxes an earlier run left behind", "server_id", serverID, "count", n)
	}
	var combiner reward.Combiner
	if rewardPlugin != "" {
		if combiner, err = host.Reward(ctx, rewardPlugin, nil); err != nil {
			return fmt.Errorf("reward %q: %w", rewardPlugin, err)
		}
	}
	engine, err := episode.NewEngine(episode.Config{
		Bundle:            b,
		Sandbox:           driver,
		ToolFormat:        toolFormats(host),
		DefaultToolFormat: o.ToolFormat,
		Reward:            combiner,
		RewardStep:        rewardStep,
		Labels:            map[string]string{server.LabelServer: serverID},
		Logger:            log.Named("episode"),
		Limits:            o.Limits.episodeLimits(),
	})
	if err != nil {
		return err
	}
	// Build the envs now, so the first resets do not wait on a compiler.
	prepCtx, prepCancel := context.WithCancel(context.Background())
	defer prepCancel()
	prepared := make(chan error, 1)
	go func() { prepared <- engine.Prepare(prepCtx) }()
	select {
	case err := <-prepared:
		if err != nil {
			return fmt.Errorf("preparing the bundle's envs: %w", err)
		}
	case sig := <-sigs:
		prepCancel()
		<-prepared
		log.Info("stopped before serving", "signal", sig.String())
		return engine.Close(context.Background())
	}
	info, err := server.BundleInfo(b, version)
	if err != nil {
		return err
	}
	srv, err := server.New(server.Options{
		Player:            engine,
		Catalog:           server.NewBundleCatalog(b),
		Info:              info,
		Token:             token,
		MaxConcurrentEnvs: o.MaxConcurrentEnvs,
		IdleTimeout:       o.IdleTimeout,
		Logger:            log.Named("server"),
		PluginRestarts:    func() float64 { return float64(host.Restarts()) },
		HTTP:              o.Limits.httpLimits(),
		MaxQueuedFrames:   o.Limits.MaxQueuedMessages,
	})
	if err != nil {
		return err
	}
	token = ""
	if o.TokenVar == "" && !isLoopback(ln.Addr()) {
		log.Warn("serving on a non-loopback address without a token: anyone who can reach it can run episodes; set --token-var", "addr", ln.Addr().String())
	}
	log.Info("serving", "bundle", b.Name, "tasks", len(b.Tasks), "url", "http://"+ln.Addr().String(),
		"sandbox", o.Sandbox, "max_concurrent_envs", o.MaxConcurrentEnvs, "token", o.TokenVar != "", "server_id", serverID)

	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		// The listener failed under us: still tear down what is live.
		ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		return errors.Join(err, srv.Shutdown(ctx), engine.Close(ctx))
	case sig := <-sigs:
		log.Info("draining: no new episodes; tearing down live ones", "signal", sig.String())
	}
	drained := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		// Sessions first (each tears its episode down), then whatever the
		// engine still holds (envs deployed to list a toolset's tools).
		err := srv.Shutdown(ctx)
		drained <- errors.Join(err, engine.Close(ctx))
	}()
	select {
	case err := <-drained:
		<-served
		if err != nil {
			return err
		}
		log.Info("stopped")
		return nil
	case sig := <-sigs:
		log.Warn("second signal: exiting now, without finishing the teardown; a restart reaps what is left", "signal", sig.String())
		host.Close()
		os.Exit(1)
		return nil
	}
}

// toolFormats returns the engine's lookup of tool-call parsers by format
// name. Format names may use '_' where plugin names do not
// (qwen3_coder -> toolformat-qwen3coder).
func toolFormats(host *pluginhost.Host) func(string) (toolformat.Parser, error) {
	var mu sync.Mutex
	cache := map[string]toolformat.Parser{}
	return func(name string) (toolformat.Parser, error) {
		mu.Lock()
		defer mu.Unlock()
		if p, ok := cache[name]; ok {
			return p, nil
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		p, err := host.ToolFormat(ctx, name, nil)
		if errors.Is(err, pluginhost.ErrNotFound) && strings.ContainsAny(name, "_-") {
			p, err = host.ToolFormat(ctx, strings.NewReplacer("_", "", "-", "").Replace(name), nil)
		}
		if err != nil {
			return nil, err
		}
		cache[name] = p
		return p, nil
	}
}

func isLoopback(a net.Addr) bool {
	tcp, ok := a.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}
