package local

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"

	"github.com/agentenv/agentenv/sdk/sandbox"
	"github.com/agentenv/agentenv/sdk/sandbox/hostenv"
)

// dockerHandle is the State of a Docker-mode handle: the ids a later plugin
// process needs to stop the sandbox, and its subnet (freed afterwards). It
// holds no env variable: those live in the container's config only.
type dockerHandle struct {
	Container string `json:"container,omitempty"`
	Network   string `json:"network,omitempty"`
	Subnet    string `json:"subnet,omitempty"`
}

// probeWait is how long a probe of the published port waits for the env
// to answer it; one that does not is probed again (the container's exit
// ends the wait).
const probeWait = 2 * time.Second

// cleanupTimeout bounds removing what a failed deploy created.
const cleanupTimeout = 30 * time.Second

// createTimeout bounds one container creation, which a deploy waits out
// even past its own deadline (so that it can remove what it made).
const createTimeout = 2 * time.Minute

// localhost is where sandbox ports are published: never other interfaces.
var localhost = netip.MustParseAddr("127.0.0.1")

// terminalRun is how a deploy runs agentenv's terminal binary: bin is
// set for terminal and no-internet envs, workdir for terminal envs.
type terminalRun struct{ bin, workdir string }

func (p *Plugin) deployDocker(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	cfg := p.config()
	eng := p.engine()
	fail := func(err error) (sandbox.Sandbox, error) {
		return sandbox.Sandbox{}, fmt.Errorf("sandbox-local: env %q (image %s): %w", spec.Env, spec.Image, err)
	}
	if spec.Port <= 0 || spec.Port > 65535 {
		return fail(fmt.Errorf("no port to publish (port %d); set the port the env listens on in its env.toml", spec.Port))
	}
	cli, err := eng.client(ctx)
	if err != nil {
		return fail(err)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(cfg.ReadyTimeout))
		defer cancel()
	}
	img, err := p.imageFor(ctx, cli, spec)
	if err != nil {
		return fail(err)
	}
	var term terminalRun
	if spec.Terminal != nil || spec.NoInternet {
		if term.bin, err = p.terminalBinary(); err != nil {
			return fail(err)
		}
	}
	if spec.Terminal != nil {
		if term.workdir, err = terminalWorkdir(spec, img); err != nil {
			return fail(err)
		}
	}
	if err := eng.loadSubnets(ctx, cli); err != nil {
		return fail(err)
	}
	id := dockerPrefix + newHex()
	name := objectPrefix + id
	labels := hostenv.CopyLabels(spec.Labels)
	labels[LabelSandbox] = id
	var h dockerHandle
	queued := time.Now()
	release, err := eng.turn(ctx)
	if err != nil {
		return fail(err)
	}
	waited := time.Since(queued)
	var once sync.Once
	done := func() { once.Do(release) }
	defer done()
	// Whatever this deploy made goes if it fails, even when cut short.
	undo := func(why error) (sandbox.Sandbox, error) {
		done()
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		if _, err := p.removeDocker(cctx, cli, id, h, 0); err != nil {
			p.log.Error("removing what a failed deploy created", "id", id, "error", err)
		}
		if ctx.Err() != nil {
			// A create the engine was still running when the call was cut
			// short may finish after the removal: sweep again, later.
			go p.sweep(cli, id)
		}
		return fail(why)
	}
	// Each phase is timed for the "deployed" line (docs/performance.md).
	phase := time.Now()
	lap := func() time.Duration { d := time.Since(phase); phase = time.Now(); return d }
	h.Network, h.Subnet, err = p.createNetwork(ctx, cli, name, labels)
	if err != nil {
		return undo(err)
	}
	tNetwork := lap()
	port, _ := network.PortFrom(uint16(spec.Port), network.TCP)
	// The engine finishes a creation it was asked for even when the caller
	// hangs up, and a big image's layer copy (vfs copies it whole) can take
	// longer than any sweep after a deadline: so the creation is waited
	// for, and what it made removed below when the deploy's time ran out.
	cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), createTimeout)
	defer ccancel()
	create := func() (client.ContainerCreateResult, error) {
		cc := &container.Config{Image: spec.Image, Env: containerEnv(spec, id), Labels: labels, ExposedPorts: network.PortSet{port: {}}}
		hc := hostConfig(cfg, spec, img, name, port)
		if spec.Terminal != nil {
			withTerminal(cc, hc, term.bin, term.workdir)
		}
		storage := eng.storageOpt(spec)
		hc.StorageOpt = storage
		res, err := cli.ContainerCreate(cctx, client.ContainerCreateOptions{
			Name: name, Config: cc, HostConfig: hc,
			NetworkingConfig: &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{name: {}}},
		})
		if err != nil && storage != nil && storageRefused(err) {
			eng.storageUnsupported(cctx, cli, spec, err)
			hc.StorageOpt = nil
			res, err = cli.ContainerCreate(cctx, client.ContainerCreateOptions{
				Name: name, Config: cc, HostConfig: hc,
				NetworkingConfig: &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{name: {}}},
			})
		}
		return res, err
	}
	created, err := create()
	if cerrdefs.IsNotFound(err) {
		// The image went after it was looked up (the lookup is cached).
		if img, err = p.imageAgain(ctx, cli, spec); err == nil {
			created, err = create()
		}
	}
	if err != nil {
		return undo(fmt.Errorf("creating the container: %w", err))
	}
	h.Container = created.ID
	if ctx.Err() != nil {
		return undo(fmt.Errorf("creating the container (it took %s): %w", time.Since(phase).Round(time.Millisecond), ctx.Err()))
	}
	tCreate := lap()
	for _, w := range created.Warnings {
		p.log.Warn("docker", "id", id, "warning", w)
	}
	began := time.Now()
	phase = began
	if _, err := cli.ContainerStart(ctx, created.ID, client.ContainerStartOptions{}); err != nil {
		return undo(fmt.Errorf("starting the container: %w", err))
	}
	tStart := lap()
	if spec.NoInternet {
		if err := p.dropRoutes(ctx, cli, id, created.ID, term.bin, labels); err != nil {
			return undo(fmt.Errorf("taking the container's route out (no_internet): %w", err))
		}
	}
	tRoutes := lap()
	done() // the env's own start-up is no load on the engine
	hostPort, err := publishedPort(ctx, cli, created.ID, port, spec.Port)
	if err == nil {
		addr := net.JoinHostPort(localhost.String(), strconv.Itoa(hostPort))
		err = waitPublished(ctx, cli, created.ID, addr, spec.Port)
	}
	if err != nil {
		if tail := containerLogs(context.WithoutCancel(ctx), cli, created.ID); tail != "" {
			err = fmt.Errorf("%w; its output ends:\n%s", err, tail)
		}
		return undo(err)
	}
	addr := net.JoinHostPort(localhost.String(), strconv.Itoa(hostPort))
	sb := sandbox.Sandbox{ID: id, Endpoint: "http://" + addr, Labels: hostenv.CopyLabels(spec.Labels), State: h.state()}
	p.log.Info("deployed", "id", id, "env", spec.Env, "container", shortID(created.ID), "subnet", h.Subnet,
		"endpoint", sb.Endpoint, "queued", waited.String(), "network", tNetwork.String(), "create", tCreate.String(),
		"start", tStart.String(), "no_route", tRoutes.String(), "first_answer", lap().String(), "listening_after", time.Since(began).String())
	return sb, nil
}

// hostConfig is where and how a sandbox's container runs: on its own
// network, its port on 127.0.0.1 only, limited and locked down.
func hostConfig(cfg Config, spec sandbox.Spec, img imageInfo, netName string, port network.Port) *container.HostConfig {
	cpu := spec.CPU
	if cpu <= 0 {
		cpu = cfg.DefaultCPU
	}
	mem := int64(spec.MemoryMB)
	if mem <= 0 {
		mem = cfg.DefaultMemoryMB
	}
	pids := cfg.PidsLimit
	yes := true
	hc := &container.HostConfig{
		NetworkMode:  container.NetworkMode(netName),
		PortBindings: network.PortMap{port: {{HostIP: localhost}}},
		Init:         &yes,
		CapDrop:      capDrop(spec),
		SecurityOpt:  []string{"no-new-privileges"},
		Resources: container.Resources{
			NanoCPUs:   int64(math.Round(cpu * 1e9)),
			Memory:     mem << 20,
			MemorySwap: mem << 20, // no swap on top
			PidsLimit:  &pids,
		},
	}
	if spec.Terminal == nil {
		// Scratch space either way (an image FROM scratch has no /tmp).
		hc.Tmpfs = map[string]string{"/tmp": fmt.Sprintf("rw,nosuid,nodev,size=%dm", cfg.TmpfsMB)}
		hc.ReadonlyRootfs = !img.writableRoot
	}
	// A terminal env's container is the task's own, run as its image
	// expects: its root and /tmp writable, the engine's default
	// capabilities (a task's image and tests install and chown as root).
	if cfg.LogMaxMB > 0 {
		// The engine's own log driver would keep all a flooding env
		// writes; json-file rotates, and `docker logs` still reads it.
		hc.LogConfig = container.LogConfig{Type: "json-file", Config: map[string]string{
			"max-size": fmt.Sprintf("%dk", max(cfg.LogMaxMB<<10/2, 1)), "max-file": "2"}}
	}
	return hc
}

// capDrop is the capabilities a container goes without: all of them for
// an env of agentenv's own, none of the engine's defaults for a terminal
// env (a task's own container) but NET_RAW when it must have no internet
// (raw frames could be sent to the gateway past the missing route).
func capDrop(spec sandbox.Spec) []string {
	switch {
	case spec.Terminal == nil:
		return []string{"ALL"}
	case spec.NoInternet:
		return []string{"NET_RAW"}
	}
	return nil
}

// containerEnv is the env's environment: its own variables, then
// agentenv's, which win.
func containerEnv(spec sandbox.Spec, id string) []string {
	keys := make([]string, 0, len(spec.EnvVars))
	for k := range spec.EnvVars {
		if k != sandbox.EnvPort && k != sandbox.EnvSandboxID && (spec.Terminal == nil || k != sandbox.EnvWorkdir) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	env := make([]string, 0, len(keys)+2)
	for _, k := range keys {
		env = append(env, k+"="+spec.EnvVars[k])
	}
	return append(env, sandbox.EnvPort+"="+strconv.Itoa(spec.Port), sandbox.EnvSandboxID+"="+id)
}

// createNetwork creates the sandbox's network on a subnet of the pool. A
// subnet the engine refuses as overlapping (another process's network, or
// another program's) stays marked used, and the next is tried.
func (p *Plugin) createNetwork(ctx context.Context, cli *client.Client, name string, labels map[string]string) (id, subnet string, err error) {
	eng := p.engine()
	pool := eng.subnets
	reloaded := false
	for range 64 {
		pfx, err := pool.take()
		if err != nil && !reloaded {
			// Subnets marked used may have been freed by other processes
			// since: ask the engine what is live, once, before giving up.
			reloaded = true
			if lerr := eng.reloadSubnets(ctx, cli); lerr != nil {
				return "", "", errors.Join(err, lerr)
			}
			pfx, err = pool.take()
		}
		if err != nil {
			return "", "", err
		}
		res, err := cli.NetworkCreate(ctx, name, client.NetworkCreateOptions{
			Driver: "bridge",
			Labels: labels,
			IPAM:   &network.IPAM{Config: []network.IPAMConfig{{Subnet: pfx}}},
		})
		if err == nil {
			return res.ID, pfx.String(), nil
		}
		if strings.Contains(err.Error(), "overlaps") {
			p.log.Debug("subnet taken outside this plugin; trying the next", "subnet", pfx, "error", err)
			continue
		}
		pool.release(pfx)
		return "", "", fmt.Errorf("creating network %s on %s: %w", name, pfx, err)
	}
	return "", "", errors.New("creating a network: 64 subnets in a row overlap networks this plugin did not make; give another subnet_base")
}

// loadSubnets marks the subnets of the engine's networks used, once per
// engine, so a restarted plugin never hands out a live sandbox's subnet.
func (e *engine) loadSubnets(ctx context.Context, cli *client.Client) error {
	e.mu.Lock()
	loaded := e.loaded
	e.mu.Unlock()
	if loaded {
		return nil
	}
	nets, err := cli.NetworkList(ctx, client.NetworkListOptions{})
	if err != nil {
		return fmt.Errorf("listing networks: %w", err)
	}
	for _, n := range nets.Items {
		for _, c := range n.IPAM.Config {
			e.subnets.markUsed(c.Subnet)
		}
	}
	e.mu.Lock()
	e.loaded = true
	e.mu.Unlock()
	return nil
}

// reloadSubnets marks used exactly the subnets of the engine's networks
// now.
func (e *engine) reloadSubnets(ctx context.Context, cli *client.Client) error {
	e.mu.Lock()
	e.loaded = false
	e.mu.Unlock()
	e.subnets.forgetAll()
	return e.loadSubnets(ctx, cli)
}

// publishedPort is the host port the engine bound for port; a container
// that already exited has none, and says so.
func publishedPort(ctx context.Context, cli *client.Client, id string, port network.Port, num int) (int, error) {
	ins, err := cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return 0, fmt.Errorf("inspecting the container: %w", err)
	}
	if st := ins.Container.State; st != nil && !st.Running {
		return 0, exitedError(st.ExitCode, num)
	}
	if ns := ins.Container.NetworkSettings; ns != nil {
		for _, b := range ns.Ports[port] {
			if n, err := strconv.Atoi(b.HostPort); err == nil && n > 0 {
				return n, nil
			}
		}
	}
	return 0, fmt.Errorf("the engine published no host port for %s", port)
}

// waitPublished returns once the env listens behind its published port,
// fails as soon as the container exits, or when ctx ends. It does not
// speak MCP: readiness is the host's business.
func waitPublished(ctx context.Context, cli *client.Client, id, addr string, port int) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wait := cli.ContainerWait(wctx, id, client.ContainerWaitOptions{Condition: container.WaitConditionNotRunning})
	exited, waitErr := wait.Result, wait.Error
	pause := time.Millisecond
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	for {
		if probe(addr) {
			return nil
		}
		timer.Reset(pause)
		select {
		case r := <-exited:
			return exitedError(int(r.StatusCode), port)
		case <-waitErr:
			waitErr = nil // the wait broke off; keep probing until ctx ends
		case <-ctx.Done():
			return fmt.Errorf("not listening on port %d: %w", port, ctx.Err())
		case <-timer.C:
		}
		pause = min(pause*2, 20*time.Millisecond)
	}
}

func exitedError(status, port int) error {
	return fmt.Errorf("the container exited (status %d) before listening on port %d", status, port)
}

// probe reports whether the env answers behind the engine's port proxy
// at addr. The proxy accepts at once whatever is behind it, and hangs up
// when it finds nothing listening in the container; under load finding
// that out takes it a while, so a connection it holds open proves nothing
// (taken for an answer, an env that had exited looked deployed). An env
// speaks HTTP: a byte of an answer to a request is proof.
func probe(addr string) bool {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(probeWait))
	if _, err := io.WriteString(conn, "GET / HTTP/1.0\r\nHost: localhost\r\n\r\n"); err != nil {
		return false
	}
	_, err = conn.Read(make([]byte, 1))
	return err == nil
}

// containerLogs is the end of a container's output, for error messages.
func containerLogs(ctx context.Context, cli *client.Client, id string) string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	rc, err := cli.ContainerLogs(ctx, id, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true, Tail: "40"})
	if err != nil {
		return ""
	}
	defer rc.Close()
	out := hostenv.NewCappedBuffer(4096)
	_, _ = stdcopy.StdCopy(out, out, rc)
	return strings.TrimSpace(out.String())
}

// sweepRounds and sweepPause bound the late sweep after a cut-short deploy.
const (
	sweepRounds = 5
	sweepPause  = time.Second
)

// sweep removes, for a few seconds, whatever the engine still creates for
// sandbox id after its deploy was cut short.
func (p *Plugin) sweep(cli *client.Client, id string) {
	for range sweepRounds {
		time.Sleep(sweepPause)
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		left, err := p.listDocker(ctx, cli, map[string]string{LabelSandbox: id})
		for _, sb := range left {
			h, _ := dockerHandleOf(sb)
			if _, err := p.removeDocker(ctx, cli, id, h, 0); err != nil {
				p.log.Warn("sweeping after a cut-short deploy", "id", id, "error", err)
			}
		}
		cancel()
		if err != nil {
			p.log.Warn("sweeping after a cut-short deploy", "id", id, "error", err)
		}
	}
}

// terminateDocker stops a container with grace and removes it and its
// network. A handle without state (made from an id) is found by name.
func (p *Plugin) terminateDocker(ctx context.Context, sb sandbox.Sandbox) error {
	h, ok := dockerHandleOf(sb)
	if !ok {
		return fmt.Errorf("sandbox-local: sandbox %q: %w", sb.ID, sandbox.ErrNotFound)
	}
	cli, err := p.engine().client(ctx)
	if err != nil {
		return fmt.Errorf("sandbox-local: terminating %s: %w", sb.ID, err)
	}
	found, err := p.removeDocker(ctx, cli, sb.ID, h, time.Duration(p.config().Grace))
	if err != nil {
		return fmt.Errorf("sandbox-local: terminating %s: %w", sb.ID, err)
	}
	if !found {
		return fmt.Errorf("sandbox-local: sandbox %q (no container or network of that name): %w", sb.ID, sandbox.ErrNotFound)
	}
	return nil
}

// removeDocker stops (with grace; at once when 0 or ctx ends) and removes a
// sandbox's container, then its network, and frees its subnet. found is
// false when neither was there.
func (p *Plugin) removeDocker(ctx context.Context, cli *client.Client, id string, h dockerHandle, grace time.Duration) (found bool, _ error) {
	ctr, netw := h.Container, h.Network
	if ctr == "" {
		ctr = objectPrefix + id
	}
	if netw == "" {
		netw = objectPrefix + id
	}
	if grace > 0 && ctx.Err() == nil {
		secs := int(math.Ceil(grace.Seconds()))
		_, err := cli.ContainerStop(ctx, ctr, client.ContainerStopOptions{Timeout: &secs})
		if err != nil && !cerrdefs.IsNotFound(err) && ctx.Err() == nil {
			p.log.Warn("stopping the container failed; removing it by force", "id", id, "error", err)
		}
	}
	// Force: SIGKILL whatever still runs (grace over, or a cut-short call).
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	release, err := p.engine().turn(rctx)
	if err != nil {
		return true, err
	}
	defer release()
	// A no-route helper a cut-short deploy left (none, nearly always).
	if _, err := cli.ContainerRemove(rctx, helperName(id), client.ContainerRemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
		p.log.Warn("removing a no-route helper", "id", id, "error", err)
	}
	_, err = cli.ContainerRemove(rctx, ctr, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	switch {
	case err == nil:
		found = true
	case strings.Contains(err.Error(), "already in progress"):
		// An earlier call's removal (one whose caller gave up, then
		// retried) still runs: wait for it rather than fail again.
		if err := waitRemoved(rctx, cli, ctr); err != nil {
			return true, fmt.Errorf("removing container %s: waiting for the removal in progress: %w", shortID(ctr), err)
		}
		found = true
	case !cerrdefs.IsNotFound(err):
		return true, fmt.Errorf("removing container %s: %w", shortID(ctr), err)
	}
	subnet := h.Subnet
	if subnet == "" {
		if ins, err := cli.NetworkInspect(rctx, netw, client.NetworkInspectOptions{}); err == nil && len(ins.Network.IPAM.Config) > 0 {
			subnet = ins.Network.IPAM.Config[0].Subnet.String()
		}
	}
	netFound, err := removeNetwork(rctx, cli, netw)
	if err != nil {
		return true, err
	}
	if netFound {
		found = true
		if pfx, err := netip.ParsePrefix(subnet); err == nil {
			p.engine().subnets.release(pfx)
		}
	}
	return found, nil
}

// waitRemoved waits until the engine no longer knows container ctr.
func waitRemoved(ctx context.Context, cli *client.Client, ctr string) error {
	pause := 20 * time.Millisecond
	for {
		_, err := cli.ContainerInspect(ctx, ctr, client.ContainerInspectOptions{})
		if cerrdefs.IsNotFound(err) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pause):
		}
		pause = min(pause*2, time.Second)
	}
}

// removeNetwork removes a network, waiting out the moment after its
// container's removal when the engine may still count an endpoint on it.
func removeNetwork(ctx context.Context, cli *client.Client, netw string) (bool, error) {
	pause := 20 * time.Millisecond
	for {
		_, err := cli.NetworkRemove(ctx, netw, client.NetworkRemoveOptions{})
		switch {
		case err == nil:
			return true, nil
		case cerrdefs.IsNotFound(err):
			return false, nil
		case strings.Contains(err.Error(), "active endpoints") && ctx.Err() == nil:
			time.Sleep(pause)
			pause = min(pause*2, time.Second)
		default:
			return true, fmt.Errorf("removing network %s: %w", shortID(netw), err)
		}
	}
}

func (h dockerHandle) state() []byte {
	raw, _ := json.Marshal(h)
	return raw
}

// dockerHandleOf reads a Docker handle's state; a handle made from an id
// alone gives an empty one (objects are then found by name). ok is false
// for an id that cannot name a container.
func dockerHandleOf(sb sandbox.Sandbox) (dockerHandle, bool) {
	var h dockerHandle
	if !validID.MatchString(sb.ID) {
		return h, false
	}
	if len(bytes.TrimSpace(sb.State)) > 0 && json.Unmarshal(sb.State, &h) != nil {
		return dockerHandle{}, true
	}
	return h, true
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
