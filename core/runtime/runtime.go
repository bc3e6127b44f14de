// Package runtime is the one place the parts are wired: it opens a bundle
// with its plugins (sandbox, reward, tool formats) and the episode engine
// that plays it. serve (core/serve), bundle check and the GridSim
// baselines open a Runtime; none wires the parts itself. eval and the
// SkyRL rows writer open none: they are clients of a running server.
package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/agentenv/agentenv/core/bundle"
	"github.com/agentenv/agentenv/core/episode"
	"github.com/agentenv/agentenv/core/pluginhost"
	"github.com/agentenv/agentenv/sdk/reward"
	"github.com/agentenv/agentenv/sdk/sandbox"
	"github.com/agentenv/agentenv/sdk/toolformat"
)

// DefaultSandbox is the sandbox plugin used when Options names none.
const DefaultSandbox = "local"

// PluginEnv names the host environment variables first-party plugins get
// besides those every plugin gets (pluginhost.Options.PluginEnv adds to
// it): the ECS sandbox's AWS SDK reads its region, credentials, profile and
// endpoints from AWS_* variables; the Kubernetes sandbox finds its
// kubeconfig in KUBECONFIG, and in a pod its API server through
// KUBERNETES_SERVICE_HOST and _PORT and the pod that owns its env pods
// through POD_NAME, POD_NAMESPACE and POD_UID (the downward API).
var PluginEnv = map[string][]string{"sandbox-ecs": {"AWS_*"},
	"sandbox-k8s": {"KUBECONFIG", "KUBERNETES_SERVICE_*", "POD_NAME", "POD_NAMESPACE", "POD_UID"}}

// startTimeout bounds starting one plugin (and reaping) at Open.
const startTimeout = 2 * time.Minute

// Options say how to open a bundle. The zero value serves with the local
// sandbox and no reward plugin.
type Options struct {
	// Sandbox is the sandbox plugin's name ("" = local), configured with
	// SandboxConfig.
	Sandbox       string
	SandboxConfig json.RawMessage
	// Reward is "", a reward plugin's name (configured with RewardConfig),
	// or score:<step id>.
	Reward       string
	RewardConfig json.RawMessage
	// ToolFormat is the default tool-call format of episodes ("" = each
	// request must name one).
	ToolFormat string
	// ServerID labels every sandbox (sandbox.LabelServer); when set, Open
	// claims it (a lock in ServersDir, held while open, by which other
	// servers and `agentenv sandboxes reap` know it runs), then reaps the
	// sandboxes an earlier, killed instance of that id left, and those of
	// any other server of ServersDir that is no longer running.
	ServerID string
	// ServersDir holds the servers' claims ("" = DefaultServersDir()).
	ServersDir string
	// Warm is how many sandboxes of each env to keep deployed, ready and
	// unused for resets to take (serve --warm); WarmLimit caps the live
	// sandboxes the pool may bring about (serve: --max-concurrent-envs).
	Warm, WarmLimit int
	Logger          hclog.Logger // nil = no logging
	// Plugins says where plugins are found (its Logger is set from Logger).
	Plugins pluginhost.Options
	// SandboxDriver and ToolFormats, when set, are used in place of plugins
	// (tests, and tools that link the first-party plugins in process).
	SandboxDriver sandbox.Driver
	ToolFormats   func(name string) (toolformat.Parser, error)
	// Tune adjusts the engine's configuration (timeouts) before it is built.
	Tune func(*episode.Config)
	// Observer hears the engine's phase timings and episode outcomes
	// (serve: the server's metrics).
	Observer episode.Observer
	// Transcripts makes the engine keep each episode's prompt, replies and
	// answers in its Result (episode.Config.Transcripts).
	Transcripts bool
}

// Runtime is an open bundle: its plugins and the engine that plays it.
type Runtime struct {
	Bundle  *bundle.Bundle
	Engine  *episode.Engine
	Sandbox sandbox.Driver
	// Host runs the plugins; nil when every part was given in process.
	Host  *pluginhost.Host
	log   hclog.Logger
	claim *claim
}

// Open loads the bundle in dir strictly, checks that its tasks can be
// rewarded as asked, starts the plugins it needs, reaps what a killed
// earlier instance left (when ServerID is set) and builds the engine. On
// error nothing it started is left running.
func Open(ctx context.Context, dir string, o Options) (_ *Runtime, err error) {
	log := o.Logger
	if log == nil {
		log = hclog.NewNullLogger()
	}
	// An absolute path keeps env commands and folders valid whatever
	// working directory a sandbox runs them from.
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("bundle %s: %w", dir, err)
	}
	b, err := bundle.Load(abs, bundle.Options{})
	if err != nil {
		return nil, err
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
		return nil, err
	}
	r := &Runtime{Bundle: b, Sandbox: o.SandboxDriver, log: log}
	defer func() {
		if err != nil {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			_ = r.Close(cctx)
		}
	}()
	if o.SandboxDriver == nil || o.ToolFormats == nil || rewardPlugin != "" {
		po := o.Plugins
		po.Logger = log
		po.PluginEnv = map[string][]string{}
		for _, env := range []map[string][]string{PluginEnv, o.Plugins.PluginEnv} {
			for id, names := range env {
				po.PluginEnv[id] = append(po.PluginEnv[id], names...)
			}
		}
		if r.Host, err = pluginhost.New(po); err != nil {
			return nil, err
		}
	}
	sctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	sandboxName := o.Sandbox
	if sandboxName == "" {
		sandboxName = DefaultSandbox
	}
	if r.Sandbox == nil {
		name := sandboxName
		if r.Sandbox, err = r.Host.Sandbox(sctx, name, o.SandboxConfig); err != nil {
			return nil, fmt.Errorf("sandbox %q: %w", name, err)
		}
	}
	if err := checkExec(sctx, r.Sandbox, sandboxName, b); err != nil {
		return nil, err
	}
	labels := map[string]string{}
	if o.ServerID != "" {
		dir := o.ServersDir
		if dir == "" {
			dir = DefaultServersDir()
		}
		if r.claim, err = Claim(dir, o.ServerID); err != nil {
			return nil, err
		}
		labels[sandbox.LabelServer] = o.ServerID
		r.reap(sctx, dir, o.ServerID)
	}
	var combiner reward.Combiner
	if rewardPlugin != "" {
		if combiner, err = r.Host.Reward(sctx, rewardPlugin, o.RewardConfig); err != nil {
			return nil, fmt.Errorf("reward %q: %w", rewardPlugin, err)
		}
	}
	formats := o.ToolFormats
	if formats == nil {
		formats = r.toolFormats()
	}
	cfg := episode.Config{
		Bundle:            b,
		Sandbox:           r.Sandbox,
		ToolFormat:        formats,
		DefaultToolFormat: o.ToolFormat,
		Reward:            combiner,
		RewardStep:        rewardStep,
		Labels:            labels,
		Logger:            log.Named("episode"),
		Warm:              o.Warm,
		WarmLimit:         o.WarmLimit,
		SandboxName:       sandboxName,
		Observer:          o.Observer,
		Transcripts:       o.Transcripts,
	}
	if o.Tune != nil {
		o.Tune(&cfg)
	}
	if r.Engine, err = episode.NewEngine(cfg); err != nil {
		return nil, err
	}
	return r, nil
}

// reap terminates the sandboxes an earlier, killed instance of serverID
// left, and those of other servers of dir that died. Failing to is logged,
// not fatal: a later start tries again.
func (r *Runtime) reap(ctx context.Context, dir, serverID string) {
	reaped, err := ReapDead(ctx, r.Sandbox, dir, serverID, false)
	for id, n := range reaped {
		if id == serverID {
			r.log.Info("reaped sandboxes an earlier run left behind", "server_id", id, "count", n)
		} else {
			r.log.Info("reaped sandboxes of a server that is no longer running", "server_id", id, "count", n)
		}
	}
	if err != nil {
		r.log.Warn("could not reap every sandbox a dead server left", "server_id", serverID, "error", err)
	}
}

// toolFormats looks tool-call parsers up among the plugins by format name,
// starting each once.
func (r *Runtime) toolFormats() func(string) (toolformat.Parser, error) {
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
		p, err := r.Host.ToolFormat(ctx, name, nil)
		var notFound *pluginhost.NotFoundError
		switch {
		case errors.As(err, &notFound):
			return nil, err // names the formats there are; no paths
		case err != nil:
			// A reset's tool_format reaches here: the client gets no
			// server path, the log gets everything.
			r.log.Error("tool-format plugin failed to start", "tool_format", name, "error", err)
			return nil, fmt.Errorf("tool format %q: its plugin failed to start (the server's log says why)", name)
		}
		cache[name] = p
		return p, nil
	}
}

// PrepareProgress hears of each env's build: Building as it begins, then
// Built when it succeeded (a failure is Prepare's error).
type PrepareProgress interface {
	Building(env string)
	Built(env string)
}

// prepareLogEvery is how often a build still running is logged.
const prepareLogEvery = 15 * time.Second

// DefaultPrepareParallel is how many envs Prepare builds at once.
const DefaultPrepareParallel = 4

// Prepare builds what the bundle's envs need (through the sandbox) so the
// first episodes do not wait for it, up to DefaultPrepareParallel envs at
// once (a Harbor dataset has an env per task; envs sharing an image build
// it once, in the sandbox), logging each build's start, a line every 15 s
// while it runs, and its end. progress (may be nil) hears of each env too.
func (r *Runtime) Prepare(ctx context.Context, progress PrepareProgress) error {
	names := r.Engine.EnvNames()
	errs := make([]error, len(names))
	sem := make(chan struct{}, DefaultPrepareParallel)
	var wg sync.WaitGroup
	for i, name := range names {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			errs[i] = fmt.Errorf("preparing env %q: %w", name, ctx.Err())
			break
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			errs[i] = r.prepareOne(ctx, name, progress)
		}()
	}
	wg.Wait()
	pe := &PrepareError{Envs: len(names)}
	for i, err := range errs {
		if err != nil {
			pe.Failed = append(pe.Failed, names[i])
		}
	}
	if err := errors.Join(errs...); err != nil {
		pe.Err = fmt.Errorf("preparing the bundle's envs: %w", err)
		return pe
	}
	return nil
}

// PrepareError is a Prepare that failed for some envs.
type PrepareError struct {
	Failed []string // the envs whose build failed, in build order
	Envs   int      // envs prepared in all
	Err    error
}

func (e *PrepareError) Error() string { return e.Err.Error() }
func (e *PrepareError) Unwrap() error { return e.Err }

// prepareOne builds one env's needs, logging its progress.
func (r *Runtime) prepareOne(ctx context.Context, name string, progress PrepareProgress) error {
	if progress != nil {
		progress.Building(name)
	}
	began := time.Now()
	r.log.Info("preparing env (building what it needs, once)", "env", name)
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(prepareLogEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				r.log.Info("still preparing env", "env", name, "elapsed", time.Since(began).Round(time.Second).String())
			}
		}
	}()
	err := r.Engine.PrepareEnv(ctx, name)
	close(done)
	if err != nil {
		return err
	}
	r.log.Info("env prepared", "env", name, "took", time.Since(began).Round(time.Millisecond).String())
	if progress != nil {
		progress.Built(name)
	}
	return nil
}

// Restarts is how many times plugin processes were restarted after a crash.
func (r *Runtime) Restarts() int64 {
	if r.Host == nil {
		return 0
	}
	return r.Host.Restarts()
}

// Close tears down every live episode and background teardown, then stops
// the plugins. It undoes all Open did.
func (r *Runtime) Close(ctx context.Context) error {
	var err error
	if r.Engine != nil {
		err = r.Engine.Close(ctx)
	}
	if r.Host != nil {
		err = errors.Join(err, r.Host.Close())
	}
	// Last: the claim says "running" until every sandbox is gone.
	return errors.Join(err, r.claim.Release(err == nil))
}
