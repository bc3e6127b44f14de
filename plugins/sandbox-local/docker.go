package local

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/moby/moby/client"
	"golang.org/x/sync/singleflight"

	"github.com/agentenv/agentenv/sdk/sandbox"
)

// Modes of the plugin (config key mode).
const (
	ModeAuto    = "auto"    // Docker for envs with an image when the engine answers, else process
	ModeDocker  = "docker"  // every env in a container
	ModeProcess = "process" // every env as a plain process
)

// dockerPrefix starts the id of every Docker-mode sandbox, and
// objectPrefix the name of its container and network.
const (
	dockerPrefix = "docker-"
	objectPrefix = "agentenv-"
)

// LabelSandbox is put on every container and network of a Docker-mode
// sandbox, besides the host's labels: its value is the sandbox id, and its
// presence marks the object as this plugin's.
const LabelSandbox = "agentenv.sandbox"

// pingTimeout bounds one check that the engine answers.
const pingTimeout = 3 * time.Second

// recheckAfter is how long a failed engine check stands before the next
// call tries again (mode docker: the engine may come up later).
const recheckAfter = 2 * time.Second

// engine is the Docker side of the plugin for one configuration: the
// client (once the engine answered), the address pool, and what Prepare
// learnt of each image.
type engine struct {
	host    string // "" = $DOCKER_HOST, else the default socket
	subnets *subnetPool
	log     hclog.Logger
	// busy bounds the engine operations in flight (creating and starting,
	// removing): an engine handed hundreds at once serves them all slowly
	// (lock contention, a port proxy and a layer copy each), so that
	// deploys run past their deadlines; in turns, each is quick.
	busy chan struct{}
	// builds bounds the image builds in flight (parallel_builds): each
	// takes the engine's CPU and disk for minutes.
	builds chan struct{}
	// tagBuilds holds a turn per image tag (chan struct{}, one slot), so a
	// tag is built once however many envs name it.
	tagBuilds sync.Map

	mu      sync.Mutex
	cli     *client.Client
	version string // the engine's version, for the log
	err     error  // why the engine did not answer at the last check
	checked time.Time
	loaded  bool // the pool knows the engine's networks
	images  map[string]imageInfo
	// rebuilds makes the deploys that find an image gone wait for one
	// build of it (docker_regone.go).
	rebuilds singleflight.Group
	// noStorageOpt is why the engine refused a container disk size (its
	// storage driver cannot cap one), once it did: storage_mb is then
	// logged once as not enforced and no longer asked for.
	noStorageOpt error
	helper       singleflight.Group // makes the no-route helper's image once
}

func newEngine(host string, subnets *subnetPool, parallel, builds int, log hclog.Logger) *engine {
	return &engine{host: host, subnets: subnets, log: log, busy: make(chan struct{}, parallel),
		builds: make(chan struct{}, builds), images: map[string]imageInfo{}}
}

// turn waits for a turn to run engine operations; release it when done.
func (e *engine) turn(ctx context.Context) (release func(), _ error) {
	select {
	case e.busy <- struct{}{}:
		return func() { <-e.busy }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for the engine (%d operations in flight): %w", cap(e.busy), ctx.Err())
	}
}

// where names the engine's address for messages.
func (e *engine) where() string {
	if e.host != "" {
		return e.host
	}
	return "$DOCKER_HOST or " + client.DefaultDockerHost
}

// client returns the engine's client once the engine answers a ping,
// negotiating the API version down to the engine's (Debian's 20.10 speaks
// 1.41). A failed check is remembered for recheckAfter.
func (e *engine) client(ctx context.Context) (*client.Client, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cli != nil {
		return e.cli, nil
	}
	if e.err != nil && time.Since(e.checked) < recheckAfter {
		return nil, e.err
	}
	e.checked = time.Now()
	opts := []client.Opt{client.FromEnv}
	if e.host != "" {
		opts = append(opts, client.WithHost(e.host))
	}
	cli, err := client.New(opts...)
	if err != nil {
		e.err = fmt.Errorf("the Docker engine at %s: %w", e.where(), err)
		return nil, e.err
	}
	pctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	ping, err := cli.Ping(pctx, client.PingOptions{NegotiateAPIVersion: true})
	if err != nil {
		cli.Close()
		e.err = fmt.Errorf("the Docker engine at %s does not answer: %w", e.where(), err)
		return nil, e.err
	}
	if v, err := cli.ServerVersion(pctx, client.ServerVersionOptions{}); err == nil {
		e.version = v.Version
	}
	e.log.Debug("docker engine answers", "api", ping.APIVersion, "client_api", cli.ClientVersion())
	e.cli, e.err = cli, nil
	return cli, nil
}

// ready reports whether the engine answers, checking at most once per
// recheckAfter; err says why not.
func (e *engine) ready(ctx context.Context) (bool, error) {
	_, err := e.client(ctx)
	return err == nil, err
}

func (e *engine) close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cli != nil {
		e.cli.Close()
		e.cli = nil
	}
}

// announce logs the mode the plugin runs in, checking the engine for the
// modes that use it: the one line that says where envs will run.
func (p *Plugin) announce(ctx context.Context) {
	cfg := p.config()
	eng := p.engine()
	switch cfg.Mode {
	case ModeProcess:
		p.log.Info("mode process: every env runs as a plain process on this machine")
		return
	}
	ok, err := eng.ready(ctx)
	switch {
	case ok:
		eng.mu.Lock()
		version := eng.version
		eng.mu.Unlock()
		what := "envs that declare a command run as processes, envs with only an image in containers (mode=docker runs every env in a container)"
		if cfg.Mode == ModeDocker {
			what = "every env runs in a container"
		}
		p.log.Info("mode "+cfg.Mode+": "+what, "docker", eng.where(), "engine", version,
			"api", eng.cli.ClientVersion(), "subnets", eng.subnets.base.String(), "subnet_size", eng.subnets.size,
			"networks", eng.subnets.capacity())
	case cfg.Mode == ModeDocker:
		p.log.Warn("mode docker, but the Docker engine does not answer: deploys fail until it does", "error", err)
	default:
		p.log.Info("mode auto: envs that declare a command run as processes; no Docker engine answers, so envs with only an image cannot run", "docker", eng.where(), "reason", err)
	}
}

// modeFor says how env spec runs: ModeDocker or ModeProcess, or why it
// cannot run here.
func (p *Plugin) modeFor(ctx context.Context, spec sandbox.Spec) (string, error) {
	cfg := p.config()
	noCommand := func(why string) error {
		if spec.Image != "" {
			return fmt.Errorf("sandbox-local: env %q has only an image (%s) and %s; give the env a command in env.toml to run it as a process", spec.Env, spec.Image, why)
		}
		return fmt.Errorf("sandbox-local: env %q has no command to run", spec.Env)
	}
	if spec.Terminal != nil {
		return p.terminalMode(ctx, cfg.Mode, spec)
	}
	switch cfg.Mode {
	case ModeProcess:
		if len(spec.Command) == 0 {
			return "", noCommand("mode is process")
		}
		return ModeProcess, nil
	case ModeDocker:
		if spec.Image == "" {
			return "", fmt.Errorf("sandbox-local: env %q has no image, and mode is docker; give it an image in env.toml, or set mode to auto or process", spec.Env)
		}
		if _, err := p.engine().client(ctx); err != nil {
			return "", fmt.Errorf("sandbox-local: env %q (mode docker): %w; start the engine, or set mode to process", spec.Env, err)
		}
		return ModeDocker, nil
	}
	// auto: an env with a command runs as a process, whatever engine
	// answers, so the choice depends on env.toml alone (the quickstart
	// promises no Docker; an engine that happens to run must not turn it
	// into a slower path); an env with only an image needs the engine.
	if len(spec.Command) > 0 {
		return ModeProcess, nil
	}
	if spec.Image == "" {
		return "", noCommand("")
	}
	if ok, err := p.engine().ready(ctx); !ok {
		return "", noCommand(err.Error())
	}
	return ModeDocker, nil
}

// terminalMode is the mode of an env that runs agentenv's terminal in its
// image (a Harbor task): Docker, whatever the env declares, since only a
// container can take the injected binary; process mode refuses it.
func (p *Plugin) terminalMode(ctx context.Context, mode string, spec sandbox.Spec) (string, error) {
	if mode == ModeProcess {
		return "", terminalRefusal(spec, "mode is process")
	}
	if spec.Image == "" {
		return "", fmt.Errorf("sandbox-local: env %q runs agentenv's terminal in its image's container, but names no image", spec.Env)
	}
	if _, err := p.engine().client(ctx); err != nil {
		return "", terminalRefusal(spec, err.Error())
	}
	return ModeDocker, nil
}

// terminalRefusal is the error for an env that runs agentenv's terminal
// in its image's container where this plugin cannot start one.
func terminalRefusal(spec sandbox.Spec, why string) error {
	return fmt.Errorf("sandbox-local: env %q runs agentenv's terminal in its image's container (a Harbor task), and %s: "+
		"process mode cannot run it; run it with --sandbox local in Docker mode (mode auto or docker, with a Docker engine running) or with --sandbox k8s", spec.Env, why)
}

// modeWhy says why an env got mode, and how to pick the other: the line
// each env's first prepare or deploy logs.
func modeWhy(cfgMode, mode string, spec sandbox.Spec) (why, other string) {
	if cfgMode != ModeAuto {
		return "mode " + cfgMode + " is set", "--sandbox-config mode=auto picks per env"
	}
	if spec.Terminal != nil {
		return "the env runs agentenv's terminal in its image's container, which only Docker mode can do", ""
	}
	if mode == ModeProcess {
		why = "mode auto runs an env that declares a command as a plain process (no isolation)"
		if spec.Image != "" {
			other = "--sandbox-config mode=docker runs it in a container of " + spec.Image
		}
		return why, other
	}
	return "mode auto runs an env with only an image in a container", "give the env a command in env.toml to run it as a process"
}

// engineForList is the engine when List and reaping should look at it:
// always in mode docker (an error if it does not answer), in mode auto
// and process only when it answers (a server that ran in Docker mode and
// restarts in process mode still reaps its containers).
func (p *Plugin) engineForList(ctx context.Context) (*client.Client, error) {
	cli, err := p.engine().client(ctx)
	if err != nil {
		if p.config().Mode == ModeDocker {
			return nil, fmt.Errorf("sandbox-local: listing containers: %w", err)
		}
		return nil, nil
	}
	return cli, nil
}

// isDocker says whether a handle is a Docker-mode sandbox's.
func isDocker(id string) bool {
	return len(id) > len(dockerPrefix) && id[:len(dockerPrefix)] == dockerPrefix
}
