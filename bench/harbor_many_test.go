package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	mobyclient "github.com/moby/moby/client"

	"github.com/agentenv/agentenv/client"
	"github.com/agentenv/agentenv/core/bundle"
	"github.com/agentenv/agentenv/core/envclient"
	"github.com/agentenv/agentenv/core/oracle"
	"github.com/agentenv/agentenv/core/runtime"
	"github.com/agentenv/agentenv/internal/servetest"
	"github.com/agentenv/agentenv/plugins/sandbox-local/dockertest"
	"github.com/agentenv/agentenv/sdk/sandbox"
)

// freshHarborTask copies examples/harbor/hello-file into a dataset of its
// own whose Dockerfile carries a label with nonce, so its image (tagged by
// the build context's hash) is new and the server must build it. It
// returns the dataset folder; the image is removed at cleanup.
func freshHarborTask(b *testing.B, cli *mobyclient.Client, nonce string) string {
	b.Helper()
	dir := filepath.Join(b.TempDir(), "harbor")
	task := filepath.Join(dir, "hello-file")
	if err := os.CopyFS(task, os.DirFS(filepath.Join(harborDir, "hello-file"))); err != nil {
		b.Fatal(err)
	}
	df := filepath.Join(task, "environment", "Dockerfile")
	f, err := os.OpenFile(df, os.O_APPEND|os.O_WRONLY, 0)
	if err == nil {
		_, err = fmt.Fprintf(f, "LABEL %s=%q\n", benchLabel, nonce)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		b.Fatal(err)
	}
	env, _ := harborTask(b, dir, "hello-file")
	b.Cleanup(func() {
		_, _ = cli.ImageRemove(context.Background(), env.Image, mobyclient.ImageRemoveOptions{Force: true, PruneChildren: true})
	})
	return dir
}

// logDuration reads key=DURATION (quoted or not) from a log line; 0 when
// it is not there.
func logDuration(line, key string) time.Duration {
	i := strings.Index(line, " "+key+"=")
	if i < 0 {
		return 0
	}
	f := strings.Fields(line[i+len(key)+2:])
	if len(f) == 0 {
		return 0
	}
	d, _ := time.ParseDuration(strings.Trim(f[0], `"`))
	return d
}

// dockerLines runs docker with args and returns its output's fields.
func dockerLines(b *testing.B, args ...string) []string {
	b.Helper()
	out, err := exec.Command("docker", args...).CombinedOutput()
	if err != nil {
		b.Fatalf("docker %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.Fields(string(out))
}

// serverObjects lists the containers and networks labelled with the
// server's id.
func serverObjects(b *testing.B, id string) (containers, networks []string) {
	b.Helper()
	return dockerLines(b, "ps", "-aq", "--filter", "label="+sandbox.LabelServer+"="+id),
		dockerLines(b, "network", "ls", "-q", "--filter", "label="+sandbox.LabelServer+"="+id)
}

// BenchmarkHarborEpisodesAtOnce plays AGENTENV_BENCH_AT_ONCE (default 32)
// episodes of examples/harbor's hello-file at once through a real
// `agentenv serve` in Docker mode, each with the task's oracle (its
// solution written with the editor tool, solve.sh run with the shell
// tool), then a reply without a tool call (test.sh run, the reward read).
// Each round serves a fresh copy of the task whose image is new, and checks
// that the server built it once (one "building image" line in its log; the
// episodes' containers all of one image ID), that every episode scored 1,
// and that no container or network with the server's label is left once
// the teardowns (after each final reply) are done, nor after SIGTERM. Timed: from the resets sent to the last reward, the image build
// (at the server's start, before /health answers) left out. Floor, after
// it in the same round: as many bare `docker run`s of the same image at
// once, agentenv-terminal bind-mounted as the entrypoint, each polled
// until it answers over HTTP, MCP connected, the solution run and test.sh
// run through the shell tool. AGENTENV_BENCH_PARALLEL_OPS sets the
// sandbox's parallel_ops (Docker calls at once; default 8).
func BenchmarkHarborEpisodesAtOnce(b *testing.B) {
	harborBase(b)
	cli := dockertest.Client(b)
	n := 32
	if v, err := strconv.Atoi(os.Getenv("AGENTENV_BENCH_AT_ONCE")); err == nil && v > 0 {
		n = v
	}
	term := servetest.TerminalBinary(b)
	serveArgs := []string{"--sandbox-config", "mode=docker", "--max-concurrent-envs", strconv.Itoa(n), "--tool-format", "hermes", "--log-level", "info"}
	if v := os.Getenv("AGENTENV_BENCH_PARALLEL_OPS"); v != "" { // the sandbox's Docker calls at once (default 8)
		serveArgs = append(serveArgs, "--sandbox-config", "parallel_ops="+v)
	}
	ctx := context.Background()
	var serveRound, floorRound, builds []time.Duration
	var deploys, verifies, teardowns, floorRemoves []time.Duration
	var queued, networks, creates, starts []time.Duration // the sandbox's deploy phases
	b.ResetTimer()
	for round := range b.N {
		b.StopTimer()
		nonce := fmt.Sprintf("%d-%d", time.Now().UnixNano(), round)
		dir := freshHarborTask(b, cli, nonce)
		abs, _ := filepath.Abs(dir)
		bd, err := bundle.Load(abs, bundle.Options{})
		if err != nil {
			b.Fatal(err)
		}
		task, err := bd.Task("hello-file")
		if err != nil {
			b.Fatal(err)
		}
		reply, err := oracle.SolutionReply(task.Harbor.SolutionDir, task.Harbor.SolutionEnv)
		if err != nil {
			b.Fatal(err)
		}
		env, verify := harborTask(b, abs, "hello-file")
		s := servetest.Start(b, servetest.Options{Bundle: abs, Ready: 10 * time.Minute,
			Env:  []string{sandbox.EnvTerminalBinary + "=" + term},
			Args: append([]string{"--sandbox-config", "state_dir=" + b.TempDir()}, serveArgs...)})
		id, err := runtime.ServerID(abs, s.Addr)
		if err != nil {
			b.Fatal(err)
		}
		if built := strings.Count(s.Log.String(), "building image"); built != 1 {
			b.Fatalf("the server built the task's image %d times before serving, want 1:\n%s", built, s.Log)
		}
		for _, line := range strings.Split(s.Log.String(), "\n") {
			if i := strings.Index(line, "image ready:"); i >= 0 {
				if j := strings.Index(line[i:], "took="); j >= 0 {
					d, _ := time.ParseDuration(strings.Fields(line[i+j+len("took="):])[0])
					builds = append(builds, d)
				}
			}
		}
		sessions := make([]*client.Session, n)
		for i := range sessions {
			sessions[i] = dial(b, s.Addr)
		}
		b.StartTimer()

		// All resets at once; the containers are looked at once all are
		// live (not timed), then every episode is played to its reward.
		t := time.Now()
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i, sess := range sessions {
			wg.Go(func() {
				_, errs[i] = sess.Reset(ctx, client.ResetRequest{TaskID: "hello-file", Wait: 10 * time.Minute})
			})
		}
		wg.Wait()
		resetsTook := time.Since(t)
		for i, err := range errs {
			if err != nil {
				b.Fatalf("reset %d of %d: %v\n%s", i, n, err, s.Log)
			}
		}
		b.StopTimer()
		ctrs, _ := serverObjects(b, id)
		if len(ctrs) != n {
			b.Fatalf("%d containers live with %d episodes", len(ctrs), n)
		}
		images := map[string]bool{}
		for _, img := range dockerLines(b, append([]string{"inspect", "-f", "{{.Image}}"}, ctrs...)...) {
			images[img] = true
		}
		if len(images) != 1 {
			b.Fatalf("the %d episodes' containers run %d images, want 1: %v", n, len(images), images)
		}
		b.StartTimer()
		t = time.Now()
		results := make([]client.Result, n)
		for i, sess := range sessions {
			wg.Go(func() {
				if _, errs[i] = sess.Step(ctx, reply); errs[i] == nil {
					results[i], errs[i] = sess.Step(ctx, "I am done.<|im_end|>")
				}
			})
		}
		wg.Wait()
		serveRound = append(serveRound, resetsTook+time.Since(t))
		b.StopTimer()
		for i, r := range results {
			if errs[i] != nil || !r.Done || r.Reward == nil || *r.Reward != 1 {
				b.Fatalf("episode %d of %d: %v, done %v, reward %v\n%s", i, n, errs[i], r.Done, r.Reward, s.Log)
			}
			deploys = append(deploys, time.Duration((r.Observation.Times["deploy"]+r.Observation.Times["ready"])*float64(time.Second)))
			verifies = append(verifies, time.Duration(r.Observation.Times["verify"]*float64(time.Second)))
		}
		// The teardowns run after each final reply, off the client's
		// path: every container and network goes without a signal.
		t = time.Now()
		for {
			c, nets := serverObjects(b, id)
			if len(c)+len(nets) == 0 {
				break
			}
			if time.Since(t) > 6*time.Minute { // past the engine's 5-minute teardown retries
				b.Fatalf("left 6 minutes after the episodes ended: containers %v, networks %v\n%s", c, nets, s.Log)
			}
			time.Sleep(time.Second)
		}
		teardowns = append(teardowns, time.Since(t))
		for _, line := range strings.Split(s.Log.String(), "\n") {
			if strings.Contains(line, deployedLine) {
				for key, into := range map[string]*[]time.Duration{"queued": &queued, "network": &networks, "create": &creates, "start": &starts} {
					*into = append(*into, logDuration(line, key))
				}
			}
		}
		if code := s.Stop(b, syscall.SIGTERM, 2*time.Minute); code != 0 {
			b.Fatalf("serve exited %d after SIGTERM:\n%s", code, s.Log)
		}
		if c, nets := serverObjects(b, id); len(c)+len(nets) != 0 {
			b.Fatalf("left after SIGTERM: containers %v, networks %v", c, nets)
		}
		played, removed := bareRound(b, env, verify.TestsDir, term, n)
		floorRound, floorRemoves = append(floorRound, played), append(floorRemoves, removed)
	}
	b.StopTimer()
	b.ReportMetric(float64(n), "episodes-at-once")
	b.ReportMetric(median(serveRound).Seconds(), "serve-round-p50-s")
	b.ReportMetric(median(floorRound).Seconds(), "docker-run-round-p50-s")
	b.ReportMetric(float64(median(serveRound))/float64(median(floorRound)), "x-docker-run")
	b.ReportMetric(median(builds).Seconds(), "image-build-s")
	b.ReportMetric(ms(median(deploys)), "episode-deploy-ready-p50-ms")
	b.ReportMetric(ms(median(verifies)), "episode-verify-p50-ms")
	b.ReportMetric(ms(median(queued)), "deploy-queued-p50-ms")
	b.ReportMetric(ms(median(networks)), "deploy-network-p50-ms")
	b.ReportMetric(ms(median(creates)), "deploy-create-p50-ms")
	b.ReportMetric(ms(median(starts)), "deploy-start-p50-ms")
	b.ReportMetric(median(teardowns).Seconds(), "serve-all-gone-s")
	b.ReportMetric(median(floorRemoves).Seconds(), "docker-rm-all-s")
}

// bareRound is the floor of BenchmarkHarborEpisodesAtOnce: n bare
// `docker run`s of env's image at once, the terminal binary bind-mounted
// as the entrypoint and the task's tests at /tests, each polled until it
// answers, MCP connected, the solution and then test.sh run through the
// shell tool (its reward checked). It returns the wall time until the
// last reward, and that of removing the containers after.
func bareRound(b *testing.B, env *bundle.Env, tests, term string, n int) (played, removed time.Duration) {
	b.Helper()
	cli := dockertest.Client(b)
	bare := newBareRun(b, cli, env)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	img, err := cli.ImageInspect(ctx, env.Image)
	if err != nil {
		b.Fatal(err)
	}
	workdir := "/"
	if img.Config != nil && img.Config.WorkingDir != "" {
		workdir = img.Config.WorkingDir
	}
	names := make([]string, n)
	ports := make([]string, n)
	taken := map[string]bool{}
	for i := range n {
		for ports[i] == "" || taken[ports[i]] { // a port just closed may be handed out again
			_, ports[i], _ = net.SplitHostPort(freePort(b))
		}
		taken[ports[i]] = true
		names[i] = fmt.Sprintf("agentenv-bench-%s-%d", bare.nonce, i)
		bare.tracked.Store(names[i], true)
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	t := time.Now()
	for i := range n {
		wg.Go(func() {
			out, err := exec.CommandContext(ctx, "docker", "run", "-d", "--name", names[i], "--network", bare.net,
				"--label", benchLabel+"="+bare.nonce, "-p", "127.0.0.1:"+ports[i]+":18765",
				"--cpus", fmt.Sprintf("%g", env.CPU), "--memory", fmt.Sprintf("%dm", env.MemoryMB),
				"-v", term+":"+sandbox.TerminalMountPath+":ro", "-v", tests+":/tests:ro",
				"--entrypoint", sandbox.TerminalMountPath, "-w", workdir,
				"-e", "AGENTENV_PORT=18765", "-e", sandbox.EnvWorkdir+"="+workdir, env.Image).CombinedOutput()
			if err != nil {
				errs[i] = fmt.Errorf("docker run: %v\n%s", err, out)
				return
			}
			addr := "127.0.0.1:" + ports[i]
			for !answers(addr) {
				if ctx.Err() != nil {
					errs[i] = fmt.Errorf("the bare container never answered at %s", addr)
					return
				}
				time.Sleep(2 * time.Millisecond)
			}
			c, err := envclient.Connect(ctx, "http://"+addr, envclient.Options{})
			if err != nil {
				errs[i] = err
				return
			}
			defer c.Close()
			if _, err := c.ListTools(ctx); err != nil {
				errs[i] = err
				return
			}
			for _, cmd := range []string{solve, "bash /tests/test.sh && cat /logs/verifier/reward.txt"} {
				args, err := json.Marshal(map[string]string{"command": cmd})
				if err != nil {
					errs[i] = err
					return
				}
				res, err := c.CallTool(ctx, "shell", args, 2*time.Minute)
				if err != nil || res.IsError || !strings.HasPrefix(res.Text, "exit code: 0") {
					errs[i] = fmt.Errorf("shell %q: %v %s", cmd, err, res.Text)
					return
				}
				if strings.Contains(cmd, "reward") && !strings.Contains(res.Text, "\n1\n") {
					errs[i] = fmt.Errorf("test.sh's reward: %s", res.Text)
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(t)
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	// Removed 8 at a time, as the sandbox does (parallel_ops): 32 at once
	// once left the engine (20.10) counting an endpoint on the network.
	t = time.Now()
	turns := make(chan struct{}, 8)
	for i := range n {
		wg.Go(func() {
			turns <- struct{}{}
			defer func() { <-turns }()
			bare.remove(names[i])
		})
	}
	wg.Wait()
	removed = time.Since(t)
	// The next round's floor makes its network on the same subnet.
	if err := removeBenchNetwork(cli, bare.net); err != nil {
		b.Fatal(err)
	}
	return took, removed
}
