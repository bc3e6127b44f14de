package bench

// Benchmarks of Harbor tasks (examples/harbor) in the local sandbox's
// Docker mode: a task's env deployed with agentenv's terminal injected,
// against a bare `docker run` of the same image running the same binary,
// in the same loop; the verifier (run_tests) against running test.sh
// directly. They need a Docker engine and the Harbor base image
// (scripts/harbor-base-image.sh, run here once; it needs debootstrap the
// first time).

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/agentenv/agentenv/core/bundle"
	"github.com/agentenv/agentenv/core/envclient"
	"github.com/agentenv/agentenv/core/episode"
	"github.com/agentenv/agentenv/internal/servetest"
	local "github.com/agentenv/agentenv/plugins/sandbox-local"
	"github.com/agentenv/agentenv/plugins/sandbox-local/dockertest"
	"github.com/agentenv/agentenv/sdk/sandbox"
	"github.com/agentenv/agentenv/sdk/sdktest"
)

const harborDir = "../examples/harbor"

var (
	harborBaseOnce sync.Once
	harborBaseErr  error
)

// harborBase makes sure the base image examples/harbor's tasks start FROM
// is on the engine.
func harborBase(b *testing.B) {
	b.Helper()
	dockertest.Client(b)
	harborBaseOnce.Do(func() {
		cmd := exec.Command("bash", filepath.Join(servetest.ModuleRoot(), "scripts", "harbor-base-image.sh"))
		// The rootfs cache is the user's, not the run's (servetest.Main
		// points XDG_CACHE_HOME at a folder of the run's own).
		cmd.Env = append(os.Environ(), "XDG_CACHE_HOME=")
		if out, err := cmd.CombinedOutput(); err != nil {
			harborBaseErr = fmt.Errorf("scripts/harbor-base-image.sh: %v\n%s", err, out)
		}
	})
	if harborBaseErr != nil {
		b.Fatal(harborBaseErr)
	}
}

// harborTask is one task of a Harbor dataset: its env and verifier step.
func harborTask(b *testing.B, dir, id string) (*bundle.Env, *bundle.Step) {
	b.Helper()
	abs, _ := filepath.Abs(dir)
	bd, err := bundle.Load(abs, bundle.Options{})
	if err != nil {
		b.Fatal(err)
	}
	task, err := bd.Task(id)
	if err != nil {
		b.Fatal(err)
	}
	var env *bundle.Env
	var verify *bundle.Step
	for i := range task.Steps {
		s := &task.Steps[i]
		switch s.Type {
		case bundle.StepDeployEnv:
			env = bd.Envs[s.Env]
		case bundle.StepVerifyTests:
			verify = s
		}
	}
	if env == nil || verify == nil || !env.Terminal {
		b.Fatalf("task %s: no terminal env or verify_tests step", id)
	}
	return env, verify
}

// tgz packs a folder's regular files as a gzipped tar, as run_tests takes
// them.
func tgz(b *testing.B, dir string) []byte {
	b.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		hdr, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		hdr.Name = filepath.ToSlash(rel)
		if err := tw.WriteHeader(hdr); err != nil || !info.Mode().IsRegular() {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, f)
		return err
	})
	if err == nil {
		err = tw.Close()
	}
	if err == nil {
		err = zw.Close()
	}
	if err != nil {
		b.Fatal(err)
	}
	return buf.Bytes()
}

// answers reports whether an HTTP server answers at addr: a byte of an
// answer to a request (a port proxy accepts before anything listens).
func answers(addr string) bool {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := io.WriteString(conn, "GET / HTTP/1.0\r\nHost: localhost\r\n\r\n"); err != nil {
		return false
	}
	_, err = conn.Read(make([]byte, 1))
	return err == nil
}

// shellCall runs command with the terminal's shell tool and returns its
// text, failing on a tool error or a non-zero exit.
func shellCall(b *testing.B, c *envclient.Client, command string) string {
	b.Helper()
	args, err := json.Marshal(map[string]string{"command": command})
	if err != nil {
		b.Fatal(err)
	}
	res, err := c.CallTool(context.Background(), "shell", args, time.Minute)
	if err != nil || res.IsError || !strings.HasPrefix(res.Text, "exit code: 0") {
		b.Fatalf("shell %q: %v %s", command, err, res.Text)
	}
	return res.Text
}

// solve is examples/harbor hello-file's solution, run before each verify
// so that the verifier's reward of 1 shows it ran.
const solve = `echo "hello, harbor" > /app/greeting.txt`

// BenchmarkHarborDeployToReady deploys examples/harbor's hello-file env as
// the engine does: the local sandbox's Deploy in Docker mode over real
// gRPC (the task's image unchanged, agentenv-terminal bind-mounted
// read-only and run as the entrypoint, its own network, the port published
// on 127.0.0.1, the task's cpus and memory), then MCP connected and the
// tools listed. Floor, deploy for deploy in the same loop: a bare
// `docker run -d` of the same image with the same binary bind-mounted as
// its entrypoint (same limits, a network made once, a port picked here),
// polled until it answers over HTTP, then MCP connected and the tools
// listed. Target: within 1.2x of the floor.
//
// The verifier is timed on its own, on each of the two containers once the
// solution is in place: run_tests (the engine's verify_tests call: the
// tests folder sent gzipped, unpacked at /tests, test.sh run, the reward
// file read back) against two floors, test.sh (bind-mounted at /tests in
// the floor's container) run through the shell tool with the reward file
// printed, and `docker exec` of test.sh.
func BenchmarkHarborDeployToReady(b *testing.B) {
	harborBase(b)
	cli := dockertest.Client(b)
	env, verify := harborTask(b, harborDir, "hello-file")
	term := servetest.TerminalBinary(b)
	p := local.New()
	logs := &phaseLog{}
	p.SetLogger(hclog.New(&hclog.LoggerOptions{Output: logs, JSONFormat: true, Level: hclog.Info}))
	cfg, _ := json.Marshal(map[string]any{"mode": "docker", "state_dir": b.TempDir(), "terminal_binary": term})
	ctx := context.Background()
	if err := p.Configure(ctx, cfg); err != nil {
		b.Fatal(err)
	}
	sb := sdktest.Sandbox(b, p)
	nonce := fmt.Sprintf("%d", time.Now().UnixNano())
	// The spec the engine sends for a Harbor task's env (core/episode).
	spec := sandbox.Spec{Env: env.Name, Dir: env.Dir, Image: env.Image, Port: env.Port, EnvVars: env.EnvVars,
		CPU: env.CPU, MemoryMB: env.MemoryMB, StorageMB: env.StorageMB, NoInternet: env.NoInternet,
		BuildTimeout: env.BuildTimeout, Terminal: &sandbox.Terminal{Workdir: env.Workdir},
		Labels: map[string]string{benchLabel: nonce, sandbox.LabelServer: "bench-" + nonce}}
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
	// The floor runs the terminal where the sandbox does: the task's
	// workdir, else the image's WORKDIR, else /.
	workdir := env.Workdir
	if workdir == "" {
		img, err := cli.ImageInspect(ctx, env.Image)
		if err != nil {
			b.Fatal(err)
		}
		if img.Config != nil {
			workdir = img.Config.WorkingDir
		}
	}
	if workdir == "" {
		workdir = "/"
	}
	testsTgz := base64.StdEncoding.EncodeToString(tgz(b, verify.TestsDir))
	runTests := map[string]any{"files_tgz_b64": testsTgz, "dir": verify.TestsPath, "script": verify.Script,
		"env": map[string]string{}, "timeout_sec": int(verify.Timeout / time.Second)}
	if verify.VerifierEnv != nil {
		runTests["env"] = verify.VerifierEnv
	}
	runTestsArgs, err := json.Marshal(runTests)
	if err != nil {
		b.Fatal(err)
	}

	ours := func() (ready, verified time.Duration) {
		t := time.Now()
		dctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
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
		ready = time.Since(t)
		shellCall(b, c, solve)
		t = time.Now()
		res, err := c.CallTool(dctx, episode.RunTestsTool, runTestsArgs, 2*time.Minute)
		verified = time.Since(t)
		if err != nil || res.IsError || !strings.Contains(res.Text, `"reward":1`) {
			b.Fatalf("run_tests: %v %s", err, res.Text)
		}
		c.Close()
		if err := sb.Terminate(ctx, h); err != nil {
			b.Fatal(err)
		}
		return ready, verified
	}
	floor := func() (ready, viaShell, viaExec time.Duration) {
		_, port, _ := net.SplitHostPort(freePort(b))
		name := fmt.Sprintf("agentenv-bench-%s-%s", bare.nonce, port)
		bare.tracked.Store(name, true)
		dctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		defer cancel()
		t := time.Now()
		out, err := exec.CommandContext(dctx, "docker", "run", "-d", "--name", name, "--network", bare.net,
			"--label", benchLabel+"="+bare.nonce, "-p", "127.0.0.1:"+port+":18765",
			"--cpus", fmt.Sprintf("%g", env.CPU), "--memory", fmt.Sprintf("%dm", env.MemoryMB),
			"-v", term+":"+sandbox.TerminalMountPath+":ro", "-v", verify.TestsDir+":/tests:ro",
			"--entrypoint", sandbox.TerminalMountPath, "-w", workdir,
			"-e", "AGENTENV_PORT=18765", "-e", sandbox.EnvWorkdir+"="+workdir, env.Image).CombinedOutput()
		if err != nil {
			b.Fatalf("docker run: %v\n%s", err, out)
		}
		addr := "127.0.0.1:" + port
		for !answers(addr) {
			if dctx.Err() != nil {
				b.Fatalf("the bare container never answered at %s", addr)
			}
			time.Sleep(2 * time.Millisecond)
		}
		c, err := envclient.Connect(dctx, "http://"+addr, envclient.Options{})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := c.ListTools(dctx); err != nil {
			b.Fatal(err)
		}
		ready = time.Since(t)
		shellCall(b, c, solve)
		t = time.Now()
		if text := shellCall(b, c, "bash /tests/test.sh && cat /logs/verifier/reward.txt"); !strings.Contains(text, "1") {
			b.Fatalf("test.sh through the shell tool: %s", text)
		}
		viaShell = time.Since(t)
		t = time.Now()
		if out, err := exec.CommandContext(dctx, "docker", "exec", name, "bash", "/tests/test.sh").CombinedOutput(); err != nil {
			b.Fatalf("docker exec test.sh: %v\n%s", err, out)
		}
		viaExec = time.Since(t)
		c.Close()
		bare.remove(name)
		return ready, viaShell, viaExec
	}
	for range 1 { // warm every path
		ours()
		floor()
	}
	logs.take()
	var o, f, v, vs, ve []time.Duration
	b.ResetTimer()
	for i := range b.N {
		// Which goes first alternates, so neither always follows the
		// other's removal.
		if i%2 == 1 {
			r, s, e := floor()
			f, vs, ve = append(f, r), append(vs, s), append(ve, e)
		}
		r, vt := ours()
		o, v = append(o, r), append(v, vt)
		if i%2 == 0 {
			r, s, e := floor()
			f, vs, ve = append(f, r), append(vs, s), append(ve, e)
		}
	}
	b.StopTimer()
	phases := logs.take()
	pick := func(get func(deployPhases) time.Duration) time.Duration {
		ds := make([]time.Duration, len(phases))
		for i, p := range phases {
			ds[i] = get(p)
		}
		return median(ds)
	}
	o50, f50 := median(o), median(f)
	b.ReportMetric(ms(o50), "deploy-ready-p50-ms")
	b.ReportMetric(ms(f50), "docker-run-ready-p50-ms")
	b.ReportMetric(float64(o50)/float64(f50), "x-docker-run")
	b.ReportMetric(ms(pick(func(p deployPhases) time.Duration { return p.create })), "create-p50-ms")
	b.ReportMetric(ms(pick(func(p deployPhases) time.Duration { return p.start })), "start-p50-ms")
	v50, vs50, ve50 := median(v), median(vs), median(ve)
	b.ReportMetric(ms(v50), "verify-p50-ms")
	b.ReportMetric(ms(vs50), "test.sh-via-shell-p50-ms")
	b.ReportMetric(ms(ve50), "test.sh-docker-exec-p50-ms")
	b.ReportMetric(float64(v50)/float64(vs50), "x-verify-vs-shell")
	b.ReportMetric(float64(v50)/float64(ve50), "x-verify-vs-docker-exec")
}
