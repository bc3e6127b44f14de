package bench

// BenchmarkOpenEnvEpisodes: whole episodes per second through agentenv
// serve (fresh envs, and an env declaring reuse = N) against OpenEnv's own
// server, 8 clients at once, on a new connection per episode and on a
// reused one, in one run.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	toml "github.com/pelletier/go-toml/v2"

	"github.com/agentenv/agentenv/client"
)

// serveGridsimReuse serves a copy of examples/gridsim whose env declares
// reuse = n, running the env binary serveGridsim's server built (so the
// copy needs no build of its own).
func serveGridsimReuse(b *testing.B, n int) *process {
	b.Helper()
	abs, _ := filepath.Abs(gridsimDir)
	envDir := filepath.Join(abs, "envs", "gridsim")
	raw, err := os.ReadFile(filepath.Join(envDir, "env.toml"))
	if err != nil {
		b.Fatal(err)
	}
	m := map[string]any{}
	if err := toml.Unmarshal(raw, &m); err != nil {
		b.Fatalf("gridsim env.toml: %v", err)
	}
	bin := filepath.Join(envDir, "bin", "gridsim-env")
	if _, err := os.Stat(bin); err != nil {
		b.Fatalf("the GridSim env binary is not built (serveGridsim builds it first): %v", err)
	}
	delete(m, "build")
	m["command"] = []string{bin}
	m["reuse"] = n
	out, err := toml.Marshal(m)
	if err != nil {
		b.Fatal(err)
	}
	dst := filepath.Join(b.TempDir(), "gridsim-reuse")
	if err := os.MkdirAll(filepath.Join(dst, "envs", "gridsim"), 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dst, "envs", "gridsim", "env.toml"), out, 0o644); err != nil {
		b.Fatal(err)
	}
	if err := os.CopyFS(filepath.Join(dst, "tasks"), os.DirFS(filepath.Join(abs, "tasks"))); err != nil {
		b.Fatal(err)
	}
	agentenv, _ := binaries(b)
	addr := freePort(b)
	return start(b, addr, "/health", agentenv, "serve", dst, "--addr", addr, "--log-level", "warn",
		"--sandbox-config", "state_dir="+b.TempDir(), "--sandbox-config", "mode=process")
}

// treeCPU is the CPU time so far of pid and every process under it (the
// sandbox plugin and its env processes under agentenv serve), each with
// its waited-for children's, in seconds.
func treeCPU(b *testing.B, pid int) float64 {
	b.Helper()
	children := map[int][]int{}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		b.Fatal(err)
	}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
		if err != nil {
			continue // gone since the listing
		}
		f := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+2:]))
		if ppid, err := strconv.Atoi(f[1]); err == nil {
			children[ppid] = append(children[ppid], p)
		}
	}
	total := cpuSeconds(b, pid)
	var walk func(int)
	walk = func(p int) {
		for _, c := range children[p] {
			if raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", c)); err == nil {
				f := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+2:]))
				for _, i := range []int{11, 12, 13, 14} {
					v, _ := strconv.ParseFloat(f[i], 64)
					total += v / 100
				}
			}
			walk(c)
		}
	}
	walk(pid)
	return total
}

// playEpisode plays one GridSim day on s: reset to day/eval-001, one
// submit_schedule reply, the final reply, which must end the episode.
func playEpisode(ctx context.Context, s *client.Session) error {
	if _, err := s.Reset(ctx, client.ResetRequest{TaskID: "day/eval-001"}); err != nil {
		return fmt.Errorf("reset: %w", err)
	}
	if _, err := s.Step(ctx, idleReply); err != nil {
		return fmt.Errorf("step: %w", err)
	}
	res, err := s.Step(ctx, "The schedule is submitted.")
	if err != nil {
		return fmt.Errorf("final reply: %w", err)
	}
	if !res.Done || res.Reward == nil {
		return fmt.Errorf("the final reply did not end the episode with a reward: %+v", res)
	}
	return nil
}

// BenchmarkOpenEnvEpisodes is whole episodes played by 8 clients at once
// on each of six servers started in the same run, in two pairs of
// comparisons:
//
//   - GridSim: agentenv serve with GridSim as it is (a fresh env process
//     deployed per episode), the same with a copy whose env declares
//     reuse = 16 (reset between episodes, off the client's path), and
//     OpenEnv's own server with bench/openenv/echo_env.py (the plain
//     in-process OpenEnv env of BenchmarkOpenEnvStep, which answers a final
//     reply with done and the schedule's profit). An episode: reset to a
//     GridSim day, one submit_schedule reply, the final reply (done,
//     reward).
//   - Echo: OpenEnv's own envs/echo_env (an MCPEnvironment: FastMCP in
//     OpenEnv's process) under uvicorn, against agentenv serve with a
//     bundle over core/testenv's echo tool, fresh and reuse = 16
//     (bench/openenv_echo_test.go). An episode: three round trips, reset
//     and two echoes.
//
// Each server is played two ways: a new connection per episode (dial,
// episode, close) and a connection each client keeps for all its
// episodes. The twelve series are timed in blocks of episodes taken in
// turn, the order rotated each round, until each has played b.N;
// episodes per second is episodes over the blocks' summed wall time, and
// each server's CPU per episode is its process tree's (serve, the sandbox
// plugin and the env processes; OpenEnv's one process) over its own
// blocks, with the server process's own CPU and the clients' (this
// process's) beside it: on a 2-core machine they share the cores.
//
// Goals (issue 31), against OpenEnv's echo_env: with reuse,
// fresh-connection episodes/s ≥ 2× OpenEnv's; with fresh envs ≥ 1×.
//
// Needs bench/openenv/setup.sh; skipped without it.
func BenchmarkOpenEnvEpisodes(b *testing.B) {
	const (
		workers = 8
		reuse   = 16
		block   = 48 // episodes per block, 6 per client
	)
	env := openenvSetup(b)
	logLoad(b, "before")
	testenv := buildTestenv(b)
	// Sessions over OpenEnv's default of 8: a client's next connection may
	// arrive before the server has released its last one.
	oe := serveOpenEnv(b, env, "MAX_CONCURRENT_ENVS=64")
	oeEcho := serveOpenEnvEcho(b, env, "MAX_CONCURRENT_ENVS=64")
	fresh := serveGridsim(b)
	reused := serveGridsimReuse(b, reuse)
	echoFresh := serveEchoBundle(b, testenv, 0)
	echoReused := serveEchoBundle(b, testenv, reuse)
	b.Logf("OpenEnv %s on %s", env["OPENENV_COMMIT"], env["VERSIONS"])

	ctx := context.Background()
	type series struct {
		name   string
		pid    int
		play   func(w int) error // client w plays one episode
		eps    int
		wall   time.Duration
		cpu    float64 // the server's process tree
		own    float64 // the server's own process
		client float64 // this benchmark's process: the 8 clients
	}
	var all []*series
	// agentenv's servers, played with agentenv's Go client.
	for _, srv := range []struct {
		name string
		p    *process
		ep   func(context.Context, *client.Session) error
	}{
		{"agentenv", fresh, playEpisode}, {"agentenv-reuse", reused, playEpisode},
		{"echo-agentenv", echoFresh, playEchoEpisode}, {"echo-agentenv-reuse", echoReused, playEchoEpisode},
		{"openenv", oe, playEpisode},
	} {
		addr, ep := srv.p.addr, srv.ep
		newConn := &series{name: srv.name + "-newconn", pid: srv.p.cmd.Process.Pid, play: func(int) error {
			dctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			c, err := client.Dial(dctx, addr, client.Options{})
			if err != nil {
				return fmt.Errorf("dial: %w", err)
			}
			defer c.Close()
			return ep(ctx, c)
		}}
		conns := make([]*client.Session, workers)
		for w := range conns {
			conns[w] = dial(b, addr)
		}
		kept := &series{name: srv.name + "-keptconn", pid: srv.p.cmd.Process.Pid,
			play: func(w int) error { return ep(ctx, conns[w]) }}
		all = append(all, newConn, kept)
	}
	// OpenEnv's echo_env, with its own frames (call_tool actions).
	echoConns := make([]*openenvEcho, workers)
	for w := range echoConns {
		c, err := dialOpenEnvEcho(ctx, oeEcho.addr)
		if err != nil {
			b.Fatalf("dial OpenEnv's echo_env: %v", err)
		}
		b.Cleanup(func() { c.Close() })
		echoConns[w] = c
	}
	all = append(all,
		&series{name: "echo-openenv-newconn", pid: oeEcho.cmd.Process.Pid, play: func(int) error {
			dctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			c, err := dialOpenEnvEcho(dctx, oeEcho.addr)
			if err != nil {
				return fmt.Errorf("dial: %w", err)
			}
			defer c.Close()
			return c.episode()
		}},
		&series{name: "echo-openenv-keptconn", pid: oeEcho.cmd.Process.Pid,
			play: func(w int) error { return echoConns[w].episode() }})

	runBlock := func(s *series, n int) {
		var wg sync.WaitGroup
		var mu sync.Mutex
		next := 0
		cpu0, own0, client0 := treeCPU(b, s.pid), cpuSeconds(b, s.pid), selfCPU()
		t := time.Now()
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					mu.Lock()
					i := next
					next++
					mu.Unlock()
					if i >= n {
						return
					}
					if err := s.play(w); err != nil {
						b.Errorf("%s: %v", s.name, err)
						return
					}
				}
			}()
		}
		wg.Wait()
		s.wall += time.Since(t)
		s.cpu += treeCPU(b, s.pid) - cpu0
		s.own += cpuSeconds(b, s.pid) - own0
		s.client += selfCPU() - client0
		s.eps += n
		if b.Failed() {
			b.FailNow()
		}
	}

	for _, s := range all { // warm every path (the reusable envs' pools fill)
		runBlock(s, block)
	}
	for _, s := range all {
		s.eps, s.wall, s.cpu, s.own, s.client = 0, 0, 0, 0, 0
	}
	b.ResetTimer()
	for round := 0; all[0].eps < b.N; round++ {
		n := min(block, b.N-all[0].eps)
		for k := range all {
			runBlock(all[(round+k)%len(all)], n)
		}
	}
	b.StopTimer()

	rate := map[string]float64{}
	for _, s := range all {
		rate[s.name] = float64(s.eps) / s.wall.Seconds()
		b.ReportMetric(rate[s.name], s.name+"-episodes/s")
		b.ReportMetric(s.cpu*1e3/float64(s.eps), s.name+"-cpu-ms/episode")
		b.ReportMetric(s.own*1e3/float64(s.eps), s.name+"-server-cpu-ms/episode")
		b.ReportMetric(s.client*1e3/float64(s.eps), s.name+"-client-cpu-ms/episode")
	}
	for _, conn := range []string{"newconn", "keptconn"} {
		for _, pair := range []string{"", "echo-"} {
			oe := rate[pair+"openenv-"+conn]
			b.ReportMetric(rate[pair+"agentenv-"+conn]/oe, pair+"x-openenv-"+conn)
			b.ReportMetric(rate[pair+"agentenv-reuse-"+conn]/oe, pair+"reuse-x-openenv-"+conn)
		}
	}
	logLoad(b, "after")
}

// logLoad logs the machine's load average (/proc/loadavg).
func logLoad(b *testing.B, when string) {
	if l, err := os.ReadFile("/proc/loadavg"); err == nil {
		b.Logf("load average %s: %s", when, strings.TrimSpace(string(l)))
	}
}
