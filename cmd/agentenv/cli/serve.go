package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"sort"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"

	"github.com/agentenv/agentenv/core/bundle"
	"github.com/agentenv/agentenv/core/episode"
	"github.com/agentenv/agentenv/core/pluginhost"
	"github.com/agentenv/agentenv/core/runtime"
	"github.com/agentenv/agentenv/core/server"
)

// shutdownTimeout bounds the drain after SIGTERM: sessions told, every
// episode torn down.
const shutdownTimeout = 60 * time.Second

func newServeCmd(version string) *cobra.Command {
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
			return runServe(args[0], version, o, sigs)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Addr, "addr", o.Addr, "address to listen on")
	f.StringVar(&o.Sandbox, "sandbox", o.Sandbox, "sandbox plugin: local, ecs (docs/ecs.md), k8s (docs/kubernetes.md), or any agentenv-sandbox-<name>")
	f.StringArrayVar(&sandboxConfig, "sandbox-config", nil, "sandbox setting as key=value (value parsed as JSON when it is JSON), or a .json/.toml file of settings; repeatable")
	f.StringVar(&o.Reward, "reward", o.Reward, "reward for tasks with several scores: a reward plugin name (mean), or score:<step id>")
	f.StringVar(&o.ToolFormat, "tool-format", o.ToolFormat, "default tool-call format of replies (a reset may name another)")
	f.IntVar(&o.MaxConcurrentEnvs, "max-concurrent-envs", o.MaxConcurrentEnvs, "live episodes at most; further resets wait in a FIFO queue")
	f.IntVar(&o.Warm, "warm", o.Warm, "sandboxes per env kept deployed, ready and unused for resets to take (they count against --max-concurrent-envs)")
	f.StringVar(&o.TokenVar, "token-var", o.TokenVar, "environment variable holding the token every request but /health must carry (empty: no token)")
	f.DurationVar(&o.IdleTimeout, "idle-timeout", o.IdleTimeout, "close a session and its episode after this long without a reset or step (0: never)")
	f.StringVar(&configFile, "config", "", "TOML file whose [serve] table sets any of these flags")
	f.BoolVar(&o.LogJSON, "log-json", o.LogJSON, "log JSON lines instead of text")
	f.StringVar(&o.LogLevel, "log-level", o.LogLevel, "log level: trace, debug, info, warn, error")
	f.BoolVar(&o.ErrorDetail, "error-detail", o.ErrorDetail, "send clients the full detail of DEPLOY_FAILED (server paths, env command lines and output, which may print secrets); for a server only you use. Without it clients get the env and a short cause, and the log the detail")
	o.Limits.addFlags(f)
	return cmd
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
func runServe(dir, version string, o serveOptions, sigs <-chan os.Signal) error {
	log := newLogger(o)
	if o.MaxConcurrentEnvs < 1 {
		return fmt.Errorf("--max-concurrent-envs must be at least 1, got %d", o.MaxConcurrentEnvs)
	}
	if err := o.Limits.check(); err != nil {
		return err
	}
	if o.Warm < 0 {
		return fmt.Errorf("--warm must be 0 or more, got %d", o.Warm)
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
	sandboxCfg, err := jsonConfig(o.SandboxConfig)
	if err != nil {
		return fmt.Errorf("--sandbox-config: %w", err)
	}
	serverID, err := runtime.ServerID(dir, o.Addr)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", o.Addr)
	if err != nil {
		return listenError(o.Addr, err)
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	metrics := server.NewMetrics()
	rt, err := runtime.Open(ctx, dir, runtime.Options{
		Sandbox: o.Sandbox, SandboxConfig: sandboxCfg, Reward: o.Reward, ToolFormat: o.ToolFormat,
		ServerID: serverID, Logger: log, Plugins: pluginhost.Options{ReloadOnSIGHUP: true},
		Tune: func(c *episode.Config) { c.Limits = o.Limits.episodeLimits() },
		Warm: o.Warm, WarmLimit: o.MaxConcurrentEnvs, Observer: metrics,
	})
	if err != nil {
		return sandboxConfigHint(err, o.SandboxConfig)
	}
	b := rt.Bundle
	info, err := server.BundleInfo(b, version)
	if err != nil {
		return errors.Join(err, rt.Close(context.Background()))
	}
	// The server listens while the envs build (minutes on a cold machine):
	// /health says "preparing" and everything else PREPARING until then.
	ready := server.NewReadiness(rt.Engine.EnvNames())
	metrics.Prime(sandboxLabel(o.Sandbox), envNames(b))
	srv, err := server.New(server.Options{
		Metrics:           metrics,
		Player:            rt.Engine,
		Catalog:           server.NewBundleCatalog(b),
		Info:              info,
		Token:             token,
		MaxConcurrentEnvs: o.MaxConcurrentEnvs,
		IdleTimeout:       o.IdleTimeout,
		Logger:            log.Named("server"),
		PluginRestarts:    func() float64 { return float64(rt.Restarts()) },
		HTTP:              o.Limits.httpLimits(),
		ErrorDetail:       o.ErrorDetail,
		MaxQueuedFrames:   o.Limits.MaxQueuedMessages,
		Readiness:         ready,
	})
	if err != nil {
		return errors.Join(err, rt.Close(context.Background()))
	}
	token = ""
	if o.TokenVar == "" && !isLoopback(ln.Addr()) {
		log.Warn("serving on a non-loopback address without a token: anyone who can reach it can run episodes; set --token-var", "addr", ln.Addr().String())
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	stopNow := func(cause error) error {
		ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		return errors.Join(cause, srv.Shutdown(ctx), rt.Close(ctx))
	}
	log.Info("listening; preparing the envs before serving episodes (/health answers 503 \"preparing\" until then)",
		"url", "http://"+ln.Addr().String(), "envs", len(b.Envs))
	// Build the envs now, so the first resets do not wait on a compiler.
	prepCtx, prepCancel := context.WithCancel(context.Background())
	defer prepCancel()
	prepared := make(chan error, 1)
	go func() { prepared <- rt.Prepare(prepCtx, ready) }()
	select {
	case err := <-prepared:
		if err != nil {
			return stopNow(err)
		}
		ready.Ready()
	case err := <-served:
		prepCancel()
		<-prepared
		return stopNow(err)
	case sig := <-sigs:
		prepCancel()
		<-prepared
		log.Info("stopped before serving", "signal", sig.String())
		return stopNow(nil)
	}
	log.Info("serving", "bundle", b.Name, "tasks", len(b.Tasks), "url", "http://"+ln.Addr().String(),
		"sandbox", o.Sandbox, "max_concurrent_envs", o.MaxConcurrentEnvs, "warm", o.Warm, "token", o.TokenVar != "", "server_id", serverID)

	select {
	case err := <-served:
		// The listener failed under us: still tear down what is live.
		ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		return errors.Join(err, srv.Shutdown(ctx), rt.Close(ctx))
	case sig := <-sigs:
		log.Info("draining: no new episodes; tearing down live ones", "signal", sig.String())
	}
	drained := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		// Sessions first (each tears its episode down), then whatever the
		// runtime still holds (envs deployed to list a toolset's tools,
		// teardowns in the background), then the plugins.
		err := srv.Shutdown(ctx)
		drained <- errors.Join(err, rt.Close(ctx))
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
		if rt.Host != nil {
			rt.Host.Close()
		}
		os.Exit(1)
		return nil
	}
}

// sandboxLabel is the sandbox's name as metrics label it.
func sandboxLabel(name string) string {
	if name == "" {
		return runtime.DefaultSandbox
	}
	return name
}

// envNames lists the bundle's envs, sorted.
func envNames(b *bundle.Bundle) []string {
	names := make([]string, 0, len(b.Envs))
	for n := range b.Envs {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func isLoopback(a net.Addr) bool {
	tcp, ok := a.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}
