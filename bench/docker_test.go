package bench

// Benchmarks of the local sandbox's Docker mode on GridSim's image, each
// against a bare `docker run` of the same image measured in the same loop.
// They need a Docker engine (.ci/run starts one; docs/sandboxes.md says how).

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	mobyclient "github.com/moby/moby/client"

	"github.com/agentenv/agentenv/client"
	"github.com/agentenv/agentenv/core/bundle"
	"github.com/agentenv/agentenv/core/envclient"
	"github.com/agentenv/agentenv/internal/servetest"
	local "github.com/agentenv/agentenv/plugins/sandbox-local"
	"github.com/agentenv/agentenv/plugins/sandbox-local/dockertest"
	"github.com/agentenv/agentenv/sdk/sandbox"
	"github.com/agentenv/agentenv/sdk/sdktest"
)

// benchLabel marks every Docker object these benchmarks make.
const benchLabel = "agentenv.bench"

// gridsimEnv is GridSim's env as its env.toml declares it.
func gridsimEnv(b *testing.B) (*bundle.Env, *bundle.Bundle) {
	b.Helper()
	abs, _ := filepath.Abs(gridsimDir)
	bd, err := bundle.Load(abs, bundle.Options{})
	if err != nil {
		b.Fatal(err)
	}
	return bd.Envs["gridsim"], bd
}

// bareRun is the floor: GridSim's image started with a bare `docker run`
// (the CLI) on a network made once, its port published on a port picked
// here (so nothing is inspected), the same cpu and memory limits, then MCP
// connected and the tools listed. It returns the endpoint and how to
// remove the container (not timed).
type bareRun struct {
	b       *testing.B
	cli     *mobyclient.Client
	image   string
	net     string
	env     *bundle.Env
	nonce   string
	tracked sync.Map // container names to remove at cleanup
}

func newBareRun(b *testing.B, cli *mobyclient.Client, env *bundle.Env) *bareRun {
	b.Helper()
	r := &bareRun{b: b, cli: cli, image: env.Image, env: env, nonce: fmt.Sprintf("%d", time.Now().UnixNano())}
	r.net = "agentenv-bench-" + r.nonce
	ctx := context.Background()
	// 10.214.255.0/24, or the next one down that no network holds (one
	// the engine cannot remove, a stale endpoint, keeps its subnet).
	for i := 255; ; i-- {
		_, err := cli.NetworkCreate(ctx, r.net, mobyclient.NetworkCreateOptions{Driver: "bridge", Labels: map[string]string{benchLabel: r.nonce},
			IPAM: &network.IPAM{Config: []network.IPAMConfig{{Subnet: netip.MustParsePrefix(fmt.Sprintf("10.214.%d.0/24", i))}}}})
		if err == nil {
			break
		}
		if !strings.Contains(err.Error(), "overlaps") || i == 240 {
			b.Fatal(err)
		}
	}
	b.Cleanup(func() {
		r.tracked.Range(func(k, _ any) bool {
			_, _ = cli.ContainerRemove(context.Background(), k.(string), mobyclient.ContainerRemoveOptions{Force: true})
			return true
		})
		_ = removeBenchNetwork(cli, r.net)
	})
	return r
}

// removeBenchNetwork removes a network made here, waiting (up to 30 s)
// out the moment after its containers' removal when the engine may still
// count endpoints on it.
func removeBenchNetwork(cli *mobyclient.Client, name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		_, err := cli.NetworkRemove(ctx, name, mobyclient.NetworkRemoveOptions{})
		if err == nil || !strings.Contains(err.Error(), "active endpoints") || ctx.Err() != nil {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// cli runs `docker run -d` and connects; api does the same through the
// engine API (create and start, nothing else).
func (r *bareRun) start(viaCLI bool) (*envclient.Client, string) {
	r.b.Helper()
	_, port, _ := net.SplitHostPort(freePort(r.b))
	name := fmt.Sprintf("agentenv-bench-%s-%s", r.nonce, port)
	r.tracked.Store(name, true)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cpus, mem := fmt.Sprintf("%g", r.env.CPU), fmt.Sprintf("%dm", r.env.MemoryMB)
	if viaCLI {
		out, err := exec.CommandContext(ctx, "docker", "run", "-d", "--name", name, "--network", r.net, "--label", benchLabel+"="+r.nonce,
			"-p", "127.0.0.1:"+port+":18765", "-e", "AGENTENV_PORT=18765", "--cpus", cpus, "--memory", mem, r.image).CombinedOutput()
		if err != nil {
			r.b.Fatalf("docker run: %v\n%s", err, out)
		}
	} else {
		p, _ := network.PortFrom(uint16(r.env.Port), network.TCP)
		created, err := r.cli.ContainerCreate(ctx, mobyclient.ContainerCreateOptions{Name: name,
			Config: &container.Config{Image: r.image, Env: []string{"AGENTENV_PORT=18765"}, Labels: map[string]string{benchLabel: r.nonce},
				ExposedPorts: network.PortSet{p: {}}},
			HostConfig: &container.HostConfig{NetworkMode: container.NetworkMode(r.net),
				PortBindings: network.PortMap{p: {{HostIP: netip.MustParseAddr("127.0.0.1"), HostPort: port}}},
				Resources:    container.Resources{NanoCPUs: int64(r.env.CPU * 1e9), Memory: int64(r.env.MemoryMB) << 20}},
		})
		if err != nil {
			r.b.Fatal(err)
		}
		if _, err := r.cli.ContainerStart(ctx, created.ID, mobyclient.ContainerStartOptions{}); err != nil {
			r.b.Fatal(err)
		}
	}
	c, err := envclient.Connect(ctx, "http://127.0.0.1:"+port, envclient.Options{})
	if err != nil {
		r.b.Fatal(err)
	}
	if _, err := c.ListTools(ctx); err != nil {
		r.b.Fatal(err)
	}
	return c, name
}

func (r *bareRun) remove(name string) {
	_, _ = r.cli.ContainerRemove(context.Background(), name, mobyclient.ContainerRemoveOptions{Force: true})
	r.tracked.Delete(name)
}

// BenchmarkDockerDeployToReady is deploy-to-ready of GridSim's env in a
// fresh container: the local sandbox's Deploy (its own network from the
// address pool, the locked-down container, the port published on
// 127.0.0.1, started) over real gRPC, then MCP connected and the tools
// listed, as the engine does. Floors in the same loop, deploy for deploy:
// a bare `docker run` of the same image (CLI) on a network made once, and
// the same create+start through the engine API; both then connect over
// MCP and list the tools. Target: within 1.3x of `docker run`.
func BenchmarkDockerDeployToReady(b *testing.B) {
	cli := dockertest.Client(b)
	env, _ := gridsimEnv(b)
	p := local.New()
	p.SetLogger(hclog.NewNullLogger())
	cfg, _ := json.Marshal(map[string]any{"mode": "docker", "state_dir": b.TempDir()})
	ctx := context.Background()
	if err := p.Configure(ctx, cfg); err != nil {
		b.Fatal(err)
	}
	sb := sdktest.Sandbox(b, p)
	nonce := fmt.Sprintf("%d", time.Now().UnixNano())
	spec := sandbox.Spec{Env: env.Name, Dir: env.Dir, Image: env.Image, Command: env.Command, Build: env.Build, Port: env.Port,
		CPU: env.CPU, MemoryMB: env.MemoryMB, Labels: map[string]string{benchLabel: nonce, sandbox.LabelServer: "bench-" + nonce}}
	if err := sb.Prepare(ctx, spec); err != nil { // builds the image if it is missing
		b.Fatal(err)
	}
	b.Cleanup(func() {
		left, _ := sb.List(context.Background(), map[string]string{benchLabel: nonce})
		for _, h := range left {
			_ = sb.Terminate(context.Background(), h)
		}
	})
	bare := newBareRun(b, cli, env)
	ours := func() time.Duration {
		t := time.Now()
		dctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		h, err := sb.Deploy(dctx, spec)
		if err != nil {
			b.Fatal(err)
		}
		c, err := envclient.Connect(dctx, h.Endpoint, envclient.Options{})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := c.ListTools(dctx); err != nil {
			b.Fatal(err)
		}
		d := time.Since(t)
		c.Close()
		if err := sb.Terminate(ctx, h); err != nil {
			b.Fatal(err)
		}
		return d
	}
	floor := func(viaCLI bool) time.Duration {
		t := time.Now()
		c, name := bare.start(viaCLI)
		d := time.Since(t)
		c.Close()
		bare.remove(name)
		return d
	}
	for range 2 { // warm every path
		ours()
		floor(true)
		floor(false)
	}
	var o, fc, fa []time.Duration
	b.ResetTimer()
	for range b.N {
		o = append(o, ours())
		fc = append(fc, floor(true))
		fa = append(fa, floor(false))
	}
	b.StopTimer()
	o50, fc50, fa50 := median(o), median(fc), median(fa)
	b.ReportMetric(ms(o50), "deploy-ready-p50-ms")
	b.ReportMetric(ms(fc50), "docker-run-p50-ms")
	b.ReportMetric(ms(fa50), "api-create-start-p50-ms")
	b.ReportMetric(float64(o50)/float64(fc50), "x-docker-run")
	b.ReportMetric(float64(o50)/float64(fa50), "x-api-create-start")
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 }

// dockerServer is `agentenv serve` of GridSim in Docker mode, its log kept.
type dockerServer struct {
	addr string
	log  *logBuffer
}

type logBuffer = servetest.Buffer

func serveDocker(b *testing.B, extra ...string) *dockerServer {
	b.Helper()
	agentenv, _ := binaries(b)
	s := &dockerServer{addr: freePort(b), log: &logBuffer{}}
	args := append([]string{"serve", gridsimDir, "--addr", s.addr, "--log-level", "info",
		"--sandbox-config", "state_dir=" + b.TempDir(), "--sandbox-config", "mode=docker"}, extra...)
	startLogged(b, s.log, s.addr, agentenv, args...)
	return s
}

// waitLog waits until the server's log holds want n times.
func (s *dockerServer) waitLog(b *testing.B, want string, n int) {
	b.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for strings.Count(s.log.String(), want) < n {
		if time.Now().After(deadline) {
			b.Fatalf("the server logged %q fewer than %d times:\n%s", want, n, s.log)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// deployedLine is what the sandbox logs for each container it deployed.
const deployedLine = "agentenv.plugins.sandbox-local: deployed:"

// BenchmarkDockerEpisode plays whole GridSim episodes in Docker through
// `agentenv serve`, one at a time: reset (deploy or take a warm sandbox,
// MCP ready, load the day), get_prices, submit_schedule, the final reply
// (grade, reward); the teardown runs after the final reply, off the
// client's path. Each iteration plays one episode on a server with
// --warm 8 and one on a server without, and the floor: a bare `docker run`
// of the same image, MCP connected, the same four tool calls made
// directly. Reported: reset and whole-episode p50s, warm and cold.
// Targets: warm reset under 20 ms p50; episode env time under 0.5 s cold
// and 50 ms warm (the SkyRL page reports 17 s a rollout).
func BenchmarkDockerEpisode(b *testing.B) {
	cli := dockertest.Client(b)
	env, bd := gridsimEnv(b)
	warm := serveDocker(b, "--warm", "8", "--max-concurrent-envs", "16")
	cold := serveDocker(b, "--max-concurrent-envs", "16")
	warm.waitLog(b, "warm pool full: env=gridsim sandboxes=8", 1)
	bare := newBareRun(b, cli, env)
	task, err := bd.Task("day/eval-001")
	if err != nil {
		b.Fatal(err)
	}
	load := task.Step("load").Arguments
	ctx := context.Background()
	getPrices := "<tool_call>\n{\"name\": \"get_prices\", \"arguments\": {}}\n</tool_call>"
	play := func(s *client.Session, i int) (reset, whole time.Duration) {
		t := time.Now()
		if _, err := s.Reset(ctx, client.ResetRequest{Split: "eval", Index: i % 200}); err != nil {
			b.Fatal(err)
		}
		reset = time.Since(t)
		for _, reply := range []string{getPrices, idleReply} {
			if _, err := s.Step(ctx, reply); err != nil {
				b.Fatal(err)
			}
		}
		if res, err := s.Step(ctx, "done"); err != nil || !res.Done {
			b.Fatalf("final reply: %v (done %v)", err, res.Done)
		}
		return reset, time.Since(t)
	}
	floor := func() time.Duration {
		t := time.Now()
		c, name := bare.start(true)
		for _, call := range []struct {
			name string
			args json.RawMessage
		}{{"load_day", load}, {"get_prices", json.RawMessage(`{}`)}, {"submit_schedule", json.RawMessage(`{"schedule":[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]}`)}, {"grade", json.RawMessage(`{}`)}} {
			if _, err := c.CallTool(ctx, call.name, call.args, 10*time.Second); err != nil {
				b.Fatal(err)
			}
		}
		d := time.Since(t)
		c.Close()
		bare.remove(name)
		return d
	}
	ws, cs := dial(b, warm.addr), dial(b, cold.addr)
	// The warm server's refill (a deploy behind each reset) is waited
	// for before the cold episode, so the two never share the engine.
	refilled := func() { warm.waitLog(b, deployedLine, strings.Count(warm.log.String(), "took a warm sandbox")+8) }
	for i := range 2 { // warm every path
		play(ws, i)
		refilled()
		play(cs, i)
		floor()
	}
	took := strings.Count(warm.log.String(), "took a warm sandbox")
	var wr, we, cr, ce, fl []time.Duration
	b.ResetTimer()
	for i := range b.N {
		r, e := play(ws, i)
		wr, we = append(wr, r), append(we, e)
		refilled()
		r, e = play(cs, i)
		cr, ce = append(cr, r), append(ce, e)
		fl = append(fl, floor())
	}
	b.StopTimer()
	hits := strings.Count(warm.log.String(), "took a warm sandbox") - took
	b.ReportMetric(ms(median(wr)), "reset-warm-p50-ms")
	b.ReportMetric(ms(median(cr)), "reset-cold-p50-ms")
	b.ReportMetric(ms(median(we)), "episode-warm-p50-ms")
	b.ReportMetric(ms(median(ce)), "episode-cold-p50-ms")
	b.ReportMetric(ms(median(fl)), "docker-run-episode-p50-ms")
	b.ReportMetric(float64(median(ce))/float64(median(fl)), "x-docker-run-cold")
	b.ReportMetric(float64(median(wr))/float64(median(cr)), "x-reset-warm-vs-cold")
	b.ReportMetric(float64(hits)/float64(b.N), "warm-hit-rate")
}
