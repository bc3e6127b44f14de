package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentenv/agentenv/internal/servetest"
	"github.com/agentenv/agentenv/sdk/sdktest/wait"

	"github.com/hashicorp/go-hclog"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"

	"github.com/agentenv/agentenv/plugins/sandbox-local/dockertest"
	"github.com/agentenv/agentenv/sdk/sandbox"
	"github.com/agentenv/agentenv/sdk/sdktest"
)

// testRun labels every Docker object these tests make, so TestMain finds
// (and fails on) any left behind.
var testRun = "sandbox-local-test-" + newHex()

const testRunLabel = "agentenv.test-run"

// dockerCtx is the build context of the test image: the dockerenv binary
// (static) and a Dockerfile FROM scratch. Built once per run.
var (
	dockerCtxOnce sync.Once
	dockerCtxDir  string
	dockerCtxErr  error
)

// dockerContext builds the test image's context once.
func dockerContext(t *testing.T) string {
	t.Helper()
	dockerCtxOnce.Do(func() {
		dockerCtxDir, dockerCtxErr = os.MkdirTemp("", "sandbox-local-docker-")
		if dockerCtxErr != nil {
			return
		}
		if dockerCtxErr = servetest.BuildStatic("", "./testdata/dockerenv", filepath.Join(dockerCtxDir, "dockerenv")); dockerCtxErr != nil {
			return
		}
		dockerCtxErr = os.WriteFile(filepath.Join(dockerCtxDir, "Dockerfile"), []byte(
			"FROM scratch\nCOPY dockerenv /dockerenv\nUSER 65534:65534\nENTRYPOINT [\"/dockerenv\"]\n"), 0o644)
	})
	if dockerCtxErr != nil {
		t.Fatal(dockerCtxErr)
	}
	return dockerCtxDir
}

// dockerSpec is the test env with an image tag of its own (removed after
// the test), built from a copy of the test context with extra Dockerfile
// lines.
func dockerSpec(t *testing.T, cli *client.Client, dockerfileExtra string) sandbox.Spec {
	t.Helper()
	src := dockerContext(t)
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	if dockerfileExtra != "" {
		f, err := os.OpenFile(filepath.Join(dir, "Dockerfile"), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintln(f, dockerfileExtra)
		f.Close()
	}
	tag := "agentenv-test-dockerenv:" + newHex()
	t.Cleanup(func() {
		_, _ = cli.ImageRemove(context.Background(), tag, client.ImageRemoveOptions{Force: true, PruneChildren: true})
	})
	return sandbox.Spec{
		Env: "dockerenv", Dir: dir, Image: tag, Port: 18765, CPU: 0.5, MemoryMB: 64,
		Labels: map[string]string{testRunLabel: testRun},
	}
}

// newDockerPlugin is the plugin in mode docker with extra settings.
func newDockerPlugin(t *testing.T, extra map[string]any) *Plugin {
	t.Helper()
	p := newPlugin(t, t.TempDir(), mergeMaps(map[string]any{"mode": "docker", "grace": "1s", "docker_host": ""}, extra))
	out := &testLog{t: t}
	t.Cleanup(func() { out.done.Store(true) })
	p.SetLogger(hclog.New(&hclog.LoggerOptions{Output: out, Level: hclog.Warn}))
	return p
}

// testLog writes a plugin's warnings into the test's output while the
// test runs (a late sweep may log after it ended).
type testLog struct {
	t    *testing.T
	done atomic.Bool
}

func (l *testLog) Write(p []byte) (int, error) {
	if !l.done.Load() {
		l.t.Log(strings.TrimSpace(string(p)))
	}
	return len(p), nil
}

func mergeMaps(a, b map[string]any) map[string]any {
	for k, v := range b {
		a[k] = v
	}
	return a
}

// dockerLeft lists this run's containers and networks still on the engine.
func dockerLeft(cli *client.Client, labels ...string) []string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	f := client.Filters{}.Add("label", testRunLabel+"="+testRun)
	for _, l := range labels {
		f = f.Add("label", l)
	}
	var left []string
	if cs, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f}); err == nil {
		for _, c := range cs.Items {
			left = append(left, "container "+strings.Join(c.Names, ","))
		}
	}
	if ns, err := cli.NetworkList(ctx, client.NetworkListOptions{Filters: f}); err == nil {
		for _, n := range ns.Items {
			left = append(left, "network "+n.Name)
		}
	}
	return left
}

// cleanupDocker removes whatever this run left on the engine and reports
// it (called by TestMain, which fails the run if anything was left).
func cleanupDocker() []string {
	cli, err := client.New(client.FromEnv)
	if err != nil {
		return nil
	}
	defer cli.Close()
	for _, dir := range []string{dockerCtxDir, terminalDir} {
		if dir != "" {
			os.RemoveAll(dir)
		}
	}
	left := dockerLeft(cli)
	if len(left) > 0 {
		p := New()
		p.SetLogger(hclog.NewNullLogger())
		sbs, _ := p.listDocker(context.Background(), cli, map[string]string{testRunLabel: testRun})
		for _, sb := range sbs {
			_ = p.Terminate(context.Background(), sb)
		}
	}
	return left
}

func TestDockerConformance(t *testing.T) {
	cli := dockertest.Client(t)
	spec := dockerSpec(t, cli, "")
	builds := filepath.Join(t.TempDir(), "builds")
	spec.Build = []string{"sh", "-c", "echo built >> " + builds}
	raw, _ := json.Marshal(map[string]any{"state_dir": t.TempDir(), "grace": "2s", "mode": "docker"})
	fresh := func() sandbox.Plugin {
		p := New()
		p.SetLogger(hclog.NewNullLogger())
		if err := p.Configure(context.Background(), raw); err != nil {
			t.Fatal(err)
		}
		return p
	}
	sdktest.SandboxConformance(t, fresh(), sdktest.SandboxCase{
		Spec:        spec,
		ExecCommand: []string{"/dockerenv", "getenv", "AGENTENV_PORT"},
		ExecStdout:  "18765",
		Restart:     fresh,
		PrepareCount: func() int {
			data, _ := os.ReadFile(builds)
			return strings.Count(string(data), "built")
		},
	})
	if left := dockerLeft(cli); len(left) > 0 {
		t.Errorf("left on the engine: %v", left)
	}
}

// A container runs locked down: its own network on a subnet of the pool,
// its port on 127.0.0.1 only, limits from the spec, no capabilities,
// no-new-privileges, init, a read-only root with a tmpfs /tmp, and the
// host's labels on the container and the network. An image labelled
// agentenv.root=writable gets a writable root.
func TestDockerContainerIsLockedDown(t *testing.T) {
	cli := dockertest.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for _, tc := range []struct {
		name, extra string
		readOnly    bool
	}{
		{"read-only root", "", true},
		{"writable root", "LABEL agentenv.root=writable", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newDockerPlugin(t, map[string]any{"pids_limit": 77})
			spec := dockerSpec(t, cli, tc.extra)
			spec.Labels[sandbox.LabelEpisode] = "ep-locked"
			if err := p.Prepare(ctx, spec); err != nil {
				t.Fatal(err)
			}
			sb := deploy(t, p, spec)
			var h dockerHandle
			if err := json.Unmarshal(sb.State, &h); err != nil || h.Container == "" || h.Network == "" {
				t.Fatalf("handle state %s: %v", sb.State, err)
			}
			ins, err := cli.ContainerInspect(ctx, h.Container, client.ContainerInspectOptions{})
			if err != nil {
				t.Fatal(err)
			}
			hc, cfg := ins.Container.HostConfig, ins.Container.Config
			checks := []struct {
				what string
				ok   bool
			}{
				{"read-only root as the image allows", hc.ReadonlyRootfs == tc.readOnly},
				{"every capability dropped", len(hc.CapDrop) == 1 && hc.CapDrop[0] == "ALL"},
				{"no-new-privileges", len(hc.SecurityOpt) == 1 && hc.SecurityOpt[0] == "no-new-privileges"},
				{"an init process", hc.Init != nil && *hc.Init},
				{"cpu from the spec", hc.NanoCPUs == 500_000_000},
				{"memory from the spec, no swap", hc.Memory == 64<<20 && hc.MemorySwap == 64<<20},
				{"pids limit from the config", hc.PidsLimit != nil && *hc.PidsLimit == 77},
				{"on its own network", string(hc.NetworkMode) == objectPrefix+sb.ID},
				{"labelled", cfg.Labels[sandbox.LabelEpisode] == "ep-locked" && cfg.Labels[LabelSandbox] == sb.ID},
				{"endpoint on loopback", strings.HasPrefix(sb.Endpoint, "http://127.0.0.1:")},
			}
			for _, c := range checks {
				if !c.ok {
					t.Errorf("%s: not so (host config %+v)", c.what, hc)
				}
			}
			for port, binds := range hc.PortBindings {
				for _, b := range binds {
					if b.HostIP != localhost {
						t.Errorf("port %s published on %s, want 127.0.0.1 only", port, b.HostIP)
					}
				}
			}
			nw, err := cli.NetworkInspect(ctx, h.Network, client.NetworkInspectOptions{})
			if err != nil {
				t.Fatal(err)
			}
			subnet := nw.Network.IPAM.Config[0].Subnet
			if !netip.MustParsePrefix("10.213.0.0/16").Contains(subnet.Addr()) || subnet.Bits() != 28 || subnet.String() != h.Subnet {
				t.Errorf("network subnet %s (handle %s), want a /28 of 10.213.0.0/16", subnet, h.Subnet)
			}
			if nw.Network.Labels[sandbox.LabelEpisode] != "ep-locked" || nw.Network.Labels[LabelSandbox] != sb.ID {
				t.Errorf("network labels %v", nw.Network.Labels)
			}
			write := func(path string) string {
				r, err := p.Exec(ctx, sb, []string{"/dockerenv", "write", path})
				if err != nil {
					t.Fatal(err)
				}
				return strings.TrimSpace(r.Stdout)
			}
			if got := write("/tmp/x"); got != "wrote" {
				t.Errorf("writing /tmp: %q", got)
			}
			got := write("/x")
			if tc.readOnly && !strings.Contains(got, "read-only file system") {
				t.Errorf("writing / on a read-only root: %q", got)
			}
			if !tc.readOnly && !strings.Contains(got, "permission denied") && got != "wrote" {
				// The image's user (nobody) may not own /: what matters
				// is that the file system itself is not read-only.
				t.Errorf("writing / on a writable root: %q", got)
			}
			r, err := p.Exec(ctx, sb, []string{"/dockerenv", "exit", "3"})
			if err != nil || r.ExitCode != 3 || r.Stdout != "to stdout\n" || r.Stderr != "to stderr\n" {
				t.Errorf("exec exit 3 = %+v, %v", r, err)
			}
		})
	}
}

// A failed deploy leaves nothing, and says why.
func TestDockerDeployFailures(t *testing.T) {
	cli := dockertest.Client(t)
	p := newDockerPlugin(t, map[string]any{"grace": "200ms"})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	good := dockerSpec(t, cli, "")
	if err := p.Prepare(ctx, good); err != nil {
		t.Fatal(err)
	}
	failing := good
	failing.EnvVars = map[string]string{"DOCKERENV_FAIL": "1"}
	noPort := good
	noPort.Port = 0
	missing := good
	missing.Image = "agentenv-test-missing:" + newHex()
	missing.Dir = t.TempDir() // nothing to build it from
	tests := []struct {
		name string
		spec sandbox.Spec
		want []string
	}{
		{"exits at start", failing, []string{`env "dockerenv"`, "exited (status 2) before listening", "failing to start as asked"}},
		{"no port", noPort, []string{"no port to publish", "env.toml"}},
		{"image gone, no Dockerfile", missing, []string{"not on the engine", missing.Image, "docker pull"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := p.Deploy(ctx, tc.spec)
			if err == nil {
				t.Fatal("Deploy succeeded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			if left := dockerLeft(cli); len(left) > 0 {
				t.Errorf("a failed deploy left %v", left)
			}
		})
	}
	t.Run("cut short by its deadline", func(t *testing.T) {
		short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		if _, err := p.Deploy(short, good); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Deploy = %v, want a deadline error", err)
		}
		wait.Until(t, "a cut-short deploy's objects to go", func() bool { return len(dockerLeft(cli)) == 0 })
	})
	t.Run("no Dockerfile and nothing to pull", func(t *testing.T) {
		spec := missing
		spec.Dir = t.TempDir()
		err := p.Prepare(ctx, spec)
		if err == nil || !strings.Contains(err.Error(), "no Dockerfile") || !strings.Contains(err.Error(), missing.Image) {
			t.Fatalf("Prepare = %v", err)
		}
	})
	t.Run("a build that fails", func(t *testing.T) {
		spec := dockerSpec(t, cli, "RUN /no-such-program")
		err := p.Prepare(ctx, spec)
		if err == nil || !strings.Contains(err.Error(), spec.Image) || !strings.Contains(err.Error(), "no-such-program") {
			t.Fatalf("Prepare = %v", err)
		}
	})
}

// The address pool is the plugin's: a small one is used up, a terminated
// sandbox's subnet is free again, and a subnet another program's network
// holds is skipped.
func TestDockerAddressPool(t *testing.T) {
	cli := dockertest.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// A /27 in /29s: 4 subnets, one of them taken by a foreign network.
	base := "10.213.254.0/27"
	foreign, err := cli.NetworkCreate(ctx, "agentenv-test-foreign-"+newHex(), client.NetworkCreateOptions{
		Driver: "bridge", Labels: map[string]string{testRunLabel: testRun},
		IPAM: &network.IPAM{Config: []network.IPAMConfig{{Subnet: netip.MustParsePrefix("10.213.254.8/29")}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = cli.NetworkRemove(context.Background(), foreign.ID, client.NetworkRemoveOptions{}) })
	p := newDockerPlugin(t, map[string]any{"subnet_base": base, "subnet_size": 29})
	spec := dockerSpec(t, cli, "")
	if err := p.Prepare(ctx, spec); err != nil {
		t.Fatal(err)
	}
	var sbs []sandbox.Sandbox
	subnets := map[string]bool{}
	for range 3 {
		sb := deploy(t, p, spec)
		sbs = append(sbs, sb)
		var h dockerHandle
		_ = json.Unmarshal(sb.State, &h)
		subnets[h.Subnet] = true
	}
	if len(subnets) != 3 || subnets["10.213.254.8/29"] {
		t.Fatalf("subnets %v: want 3 distinct ones, never the foreign network's", subnets)
	}
	if _, err := p.Deploy(ctx, spec); err == nil || !strings.Contains(err.Error(), "used up") {
		t.Fatalf("a deploy past the pool: %v, want it used up", err)
	}
	if err := p.Terminate(ctx, sbs[1]); err != nil {
		t.Fatal(err)
	}
	var freed dockerHandle
	_ = json.Unmarshal(sbs[1].State, &freed)
	again := deploy(t, p, spec)
	var h dockerHandle
	_ = json.Unmarshal(again.State, &h)
	if h.Subnet != freed.Subnet {
		t.Errorf("after a terminate the deploy got %s, want the freed %s", h.Subnet, freed.Subnet)
	}
	// A restarted plugin loads the live subnets from the engine.
	p2 := newDockerPlugin(t, map[string]any{"subnet_base": base, "subnet_size": 29})
	if _, err := p2.Deploy(ctx, spec); err == nil || !strings.Contains(err.Error(), "used up") {
		t.Fatalf("a restarted plugin deployed on a full pool: %v", err)
	}
}

// A network a killed deploy left without its container is listed, and
// terminated, like any sandbox.
func TestDockerListsAndReapsOrphanNetworks(t *testing.T) {
	cli := dockertest.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := newDockerPlugin(t, nil)
	id := dockerPrefix + newHex()
	labels := map[string]string{LabelSandbox: id, testRunLabel: testRun, sandbox.LabelServer: "srv-orphan"}
	if _, _, err := p.createNetwork(ctx, cli, objectPrefix+id, labels); err != nil {
		t.Fatal(err)
	}
	got, err := p.List(ctx, map[string]string{sandbox.LabelServer: "srv-orphan"})
	if err != nil || len(got) != 1 || got[0].ID != id {
		t.Fatalf("List = %+v, %v; want the orphan network as sandbox %s", got, err, id)
	}
	if got[0].Labels[LabelSandbox] != "" || got[0].Labels[sandbox.LabelServer] != "srv-orphan" {
		t.Errorf("listed labels %v", got[0].Labels)
	}
	if err := p.Terminate(ctx, got[0]); err != nil {
		t.Fatal(err)
	}
	if left := dockerLeft(cli); len(left) > 0 {
		t.Fatalf("left: %v", left)
	}
	if err := p.Terminate(ctx, got[0]); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("second Terminate = %v, want ErrNotFound", err)
	}
}

// Prepare builds the image once per process, even under concurrent calls,
// and logs the build's progress.
func TestDockerPrepareBuildsOnceWithProgress(t *testing.T) {
	cli := dockertest.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var logBuf lockedLog
	p := New()
	p.SetLogger(hclog.New(&hclog.LoggerOptions{Output: &logBuf, Level: hclog.Info}))
	raw, _ := json.Marshal(map[string]any{"state_dir": t.TempDir(), "mode": "docker"})
	if err := p.Configure(ctx, raw); err != nil {
		t.Fatal(err)
	}
	spec := dockerSpec(t, cli, "")
	c := sdktest.Sandbox(t, p)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = c.Prepare(ctx, spec) }()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	log := logBuf.String()
	if n := strings.Count(log, "building image"); n != 1 {
		t.Errorf("the image was built %d times:\n%s", n, log)
	}
	for _, want := range []string{"mode docker: every env runs in a container", "COPY dockerenv /dockerenv", "image ready", "env mode: env=dockerenv mode=docker"} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
	// A new process finds the tag and builds nothing.
	logBuf.Reset()
	p2 := newDockerPlugin(t, nil)
	p2.SetLogger(hclog.New(&hclog.LoggerOptions{Output: &logBuf, Level: hclog.Info}))
	if err := p2.Prepare(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if log := logBuf.String(); strings.Contains(log, "building image") || !strings.Contains(log, "image present") {
		t.Errorf("a second process rebuilt the image:\n%s", log)
	}
}

// lockedLog is a log sink safe for the plugin's goroutines.
type lockedLog struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *lockedLog) Reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Reset()
}
