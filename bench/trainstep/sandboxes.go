package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/agentenv/agentenv/core/bundle"
	"github.com/agentenv/agentenv/core/envclient"
	"github.com/agentenv/agentenv/plugins/sandbox-ecs/standin"
)

// sandboxKind is one way of running the envs: the serve flags it takes and
// its floor (nil: none measured here).
type sandboxKind struct {
	name      string
	floorName string
	setup     func(ctx context.Context, o options, dir string) (*setup, error)
	// floor measures the bare deploy (to MCP ready) and a bare MCP call.
	floor func(ctx context.Context, o options, s *setup) (deploy, call []time.Duration, err error)
}

// setup is what a sandbox needs while measured.
type setup struct {
	args   []string // serve flags
	env    []string // serve's environment additions
	envDef *bundle.Env
	// warmed, when set, waits until the server's warm pool is full.
	warmed  func(ctx context.Context, s *server) error
	closers []func()
}

func (s *setup) close() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
}

var sandboxKinds = []sandboxKind{
	{name: "process", floorName: "env process started by hand", setup: processSetup, floor: processFloor},
	{name: "docker", floorName: "bare `docker run`", setup: dockerSetup(0), floor: dockerFloor},
	{name: "docker-warm", floorName: "bare `docker run`", setup: dockerSetup(-1), floor: dockerFloor},
	{name: "ecs", floorName: "the stand-in's own container start (what its RunTask does)", setup: ecsSetup, floor: ecsFloor},
	// Kubernetes (k8s.go): the test cluster of `make k8s-up`, or the one
	// --k8s-config names.
	{name: "k8s", floorName: "a bare pod through client-go, Running and ready", setup: k8sSetup, floor: k8sFloor},
}

func sandboxNames() []string {
	var out []string
	for _, k := range sandboxKinds {
		out = append(out, k.name)
	}
	return out
}

func sandboxByName(name string) (sandboxKind, bool) {
	for _, k := range sandboxKinds {
		if k.name == name {
			return k, true
		}
	}
	return sandboxKind{}, false
}

// firstEnv is the bundle's first env (GridSim has one).
func firstEnv(o options) (*bundle.Env, error) {
	b, err := bundle.Load(o.bundle, bundle.Options{})
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(b.Envs))
	for n := range b.Envs {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(names) == 0 {
		return nil, fmt.Errorf("bundle %s has no env", o.bundle)
	}
	return b.Envs[names[0]], nil
}

func processSetup(_ context.Context, o options, dir string) (*setup, error) {
	env, err := firstEnv(o)
	if err != nil {
		return nil, err
	}
	return &setup{envDef: env, args: []string{"--sandbox-config", "mode=process", "--sandbox-config", "state_dir=" + filepath.Join(dir, "state")}}, nil
}

// dockerSetup runs the envs in containers; warm -1 keeps a pool of o.c.
func dockerSetup(warm int) func(context.Context, options, string) (*setup, error) {
	return func(_ context.Context, o options, dir string) (*setup, error) {
		env, err := firstEnv(o)
		if err != nil {
			return nil, err
		}
		s := &setup{envDef: env, args: []string{"--sandbox-config", "mode=docker", "--sandbox-config", "state_dir=" + filepath.Join(dir, "state")}}
		if warm < 0 {
			warm = o.c
			s.args = append(s.args, "--warm", strconv.Itoa(warm))
			s.warmed = func(ctx context.Context, srv *server) error { return waitWarm(ctx, srv, warm) }
		}
		return s, nil
	}
}

// waitWarm waits until the server reports n sandboxes ready in the pool
// (its live episodes gauge stays 0; the sandboxes show as warm in /metrics
// only through the deploys: n deploy samples with no episode).
func waitWarm(ctx context.Context, srv *server, n int) error {
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		if got := scrapeSum(srv.url, "agentenv_episode_phase_seconds_count", `phase="ready"`); got >= float64(n) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("the warm pool never filled %d sandboxes", n)
}

func ecsSetup(ctx context.Context, o options, dir string) (*setup, error) {
	env, err := firstEnv(o)
	if err != nil {
		return nil, err
	}
	d, err := standin.NewDocker(ctx)
	if err != nil {
		return nil, fmt.Errorf("the ECS stand-in needs Docker: %w", err)
	}
	st := standin.New(standin.Options{Runner: d, StopGrace: time.Second})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	hs := &http.Server{Handler: st, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	cfg, _ := json.Marshal(map[string]any{
		"region": "us-east-1", "cluster": "default", "subnets": []string{"subnet-0standin"},
		"security_groups": []string{"sg-0standin"}, "endpoint_url": "http://" + ln.Addr().String(),
		"launch_rate": 50, "launch_burst": 16,
	})
	path := filepath.Join(dir, "ecs.json")
	if err := os.WriteFile(path, cfg, 0o600); err != nil {
		return nil, err
	}
	s := &setup{envDef: env, args: []string{"--sandbox", "ecs", "--sandbox-config", path},
		env: []string{"AWS_ACCESS_KEY_ID=AKIDSTANDIN", "AWS_SECRET_ACCESS_KEY=standin-secret-key", "AWS_REGION=us-east-1"}}
	s.closers = append(s.closers, func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = hs.Close()
		_ = st.Close(ctx)
		_ = d.Close(ctx)
	})
	ecsRunner = d // the floor starts containers through the same runner
	return s, nil
}

var ecsRunner *standin.Docker

// ready connects to an env's MCP server and lists its tools, as the engine does.
func ready(ctx context.Context, url string) (*envclient.Client, error) {
	c, err := envclient.Connect(ctx, url, envclient.Options{})
	if err != nil {
		return nil, err
	}
	if _, err := c.ListTools(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// bareCall is the MCP floor: one cheap tool call on a ready env.
func bareCall(ctx context.Context, c *envclient.Client, o options, n int) ([]time.Duration, error) {
	var out []time.Duration
	for range n {
		t := time.Now()
		if _, err := c.CallTool(ctx, "get_prices", json.RawMessage(`{}`), 10*time.Second); err != nil {
			return nil, err
		}
		out = append(out, time.Since(t))
	}
	return out, nil
}

// floorRuns runs o.floors bare deploys, o.c at once as the step deploys
// (the machine's contention is then the same), and the MCP floor on the
// first env. one deploys env i and returns its time to MCP ready, the
// ready client, and how to remove it (not timed).
func floorRuns(ctx context.Context, o options, one func(ctx context.Context, i int) (time.Duration, *envclient.Client, func(), error)) ([]time.Duration, []time.Duration, error) {
	n := max(o.floors, 1)
	deploys := make([]time.Duration, n)
	var calls []time.Duration
	err := parallel(n, o.c, func(i int) error {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		d, c, remove, err := one(rctx, i)
		if remove != nil {
			defer remove()
		}
		if err != nil {
			return err
		}
		defer c.Close()
		deploys[i] = d
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	// The MCP floor, alone: one env, calls one after another.
	rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	_, c, remove, err := one(rctx, n)
	if remove != nil {
		defer remove()
	}
	if err != nil {
		return nil, nil, err
	}
	defer c.Close()
	if calls, err = bareCall(rctx, c, o, n*8); err != nil {
		return nil, nil, err
	}
	return deploys, calls, nil
}

func processFloor(ctx context.Context, o options, s *setup) ([]time.Duration, []time.Duration, error) {
	// The server builds the env on its first start; build it here first
	// so the floor times a start, not a compile.
	if err := buildEnv(ctx, s.envDef); err != nil {
		return nil, nil, err
	}
	return floorRuns(ctx, o, func(ctx context.Context, _ int) (time.Duration, *envclient.Client, func(), error) {
		addr, err := freeAddr()
		if err != nil {
			return 0, nil, nil, err
		}
		_, port, _ := net.SplitHostPort(addr)
		t := time.Now()
		cmd := exec.Command(envCommand(s.envDef), s.envDef.Command[1:]...)
		cmd.Dir = s.envDef.Dir
		cmd.Env = append(os.Environ(), "AGENTENV_PORT="+port)
		if err := cmd.Start(); err != nil {
			return 0, nil, nil, err
		}
		remove := func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }
		c, err := ready(ctx, "http://127.0.0.1:"+port)
		return time.Since(t), c, remove, err
	})
}

// dockerFloor is a bare `docker run` of the env's image on a network of
// its own (an engine run with --bridge=none publishes no ports on the
// default one), port published on loopback, then MCP ready.
func dockerFloor(ctx context.Context, o options, s *setup) ([]time.Duration, []time.Duration, error) {
	if s.envDef.Image == "" {
		return nil, nil, fmt.Errorf("env %s has no image", s.envDef.Name)
	}
	if out, err := exec.CommandContext(ctx, "docker", "image", "inspect", s.envDef.Image).CombinedOutput(); err != nil {
		return nil, nil, fmt.Errorf("image %s is not built (run the docker sandbox once, or docker build it): %s", s.envDef.Image, out)
	}
	// A network (and subnet) per floor: the engine can keep a removed
	// floor's network for a while ("has active endpoints").
	floorNets++
	netName := fmt.Sprintf("trainstep-floor-%d-%d", os.Getpid(), floorNets)
	subnet := fmt.Sprintf("10.214.%d.0/24", 254-(os.Getpid()+floorNets)%200)
	if out, err := exec.CommandContext(ctx, "docker", "network", "create", "--subnet", subnet, "--label", "agentenv.bench=trainstep", netName).CombinedOutput(); err != nil {
		return nil, nil, fmt.Errorf("docker network create: %w: %s", err, out)
	}
	defer removeNetwork(netName)
	return floorRuns(ctx, o, func(ctx context.Context, i int) (time.Duration, *envclient.Client, func(), error) {
		addr, err := freeAddr()
		if err != nil {
			return 0, nil, nil, err
		}
		_, port, _ := net.SplitHostPort(addr)
		name := fmt.Sprintf("%s-%d", netName, i)
		t := time.Now()
		out, err := exec.CommandContext(ctx, "docker", "run", "-d", "--name", name, "--network", netName, "--label", "agentenv.bench=trainstep",
			"-p", "127.0.0.1:"+port+":"+strconv.Itoa(s.envDef.Port), "-e", "AGENTENV_PORT="+strconv.Itoa(s.envDef.Port),
			"--cpus", fmt.Sprintf("%g", s.envDef.CPU), "--memory", fmt.Sprintf("%dm", s.envDef.MemoryMB), s.envDef.Image).CombinedOutput()
		remove := func() { _ = exec.Command("docker", "rm", "-f", name).Run() }
		if err != nil {
			return 0, nil, remove, fmt.Errorf("docker run: %w: %s", err, out)
		}
		c, err := ready(ctx, "http://127.0.0.1:"+port)
		return time.Since(t), c, remove, err
	})
}

var floorNets int

// removeNetwork removes the floor's network; the engine can refuse while
// the last endpoint is still being taken down, so it tries again a few times.
func removeNetwork(name string) {
	var out []byte
	var err error
	for range 10 {
		if out, err = exec.Command("docker", "network", "rm", name).CombinedOutput(); err == nil {
			return
		}
		time.Sleep(time.Second)
	}
	fmt.Fprintf(os.Stderr, "trainstep: docker network rm %s: %v: %s\n", name, err, out)
}

// ecsFloor starts the env's container through the stand-in's own runner
// (what its RunTask does underneath, without the API, the task state
// machine or the plugin's polling), then MCP ready.
func ecsFloor(ctx context.Context, o options, s *setup) ([]time.Duration, []time.Duration, error) {
	if ecsRunner == nil {
		return nil, nil, fmt.Errorf("no stand-in runner")
	}
	return floorRuns(ctx, o, func(ctx context.Context, i int) (time.Duration, *envclient.Client, func(), error) {
		// 127.0.9.x: loopback addresses the stand-in's own tasks do not take.
		ip := netip.AddrFrom4([4]byte{127, 0, 9, byte(10 + i%200)})
		t := time.Now()
		c, err := ecsRunner.Start(ctx, standin.RunSpec{Task: fmt.Sprintf("floor-%d-%d", os.Getpid(), i), Name: "env", Image: s.envDef.Image,
			Env: []string{"AGENTENV_PORT=" + strconv.Itoa(s.envDef.Port)}, IP: ip, Ports: []int{s.envDef.Port}})
		if err != nil {
			return 0, nil, nil, err
		}
		remove := func() { _ = c.Stop(context.Background(), time.Second) }
		mc, err := ready(ctx, "http://"+net.JoinHostPort(ip.String(), strconv.Itoa(s.envDef.Port)))
		return time.Since(t), mc, remove, err
	})
}

// scrapeSum adds up the samples of a metric whose labels contain match.
func scrapeSum(url, metric, match string) float64 {
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if (strings.HasPrefix(line, metric+"{") || strings.HasPrefix(line, metric+" ")) && strings.Contains(line, match) {
			v, _ := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			sum += v
		}
	}
	return sum
}
