package local

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentenv/agentenv/internal/servetest"
	"github.com/agentenv/agentenv/sdk/sdktest/wait"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/hashicorp/go-hclog"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentenv/agentenv/plugins/sandbox-local/dockertest"
	"github.com/agentenv/agentenv/sdk/sandbox"
	"github.com/agentenv/agentenv/sdk/sdktest"
)

// harborBase is the base image of the Harbor test tasks (Debian with bash
// and python3), built by scripts/harbor-base-image.sh.
const harborBase = "agentenv/harbor-base:bookworm"

var (
	terminalOnce sync.Once
	terminalDir  string
	terminalErr  error
)

// terminalBin is agentenv's terminal binary (cmd/agentenv-terminal), and
// standIn the stand-in that misbehaves (testdata/terminalenv), both built
// statically once per run.
func terminalBin(t *testing.T) (real, standIn string) {
	t.Helper()
	terminalOnce.Do(func() {
		if terminalDir, terminalErr = os.MkdirTemp("", "sandbox-local-terminal-"); terminalErr != nil {
			return
		}
		for out, src := range map[string]string{"agentenv-terminal": "../../cmd/agentenv-terminal", "terminalenv": "./testdata/terminalenv"} {
			if terminalErr = servetest.BuildStatic("", src, filepath.Join(terminalDir, out)); terminalErr != nil {
				return
			}
		}
	})
	if terminalErr != nil {
		t.Fatal(terminalErr)
	}
	return filepath.Join(terminalDir, "agentenv-terminal"), filepath.Join(terminalDir, "terminalenv")
}

// shell runs command through the terminal's shell tool at endpoint, as the
// model does, and returns the tool's text.
func shell(t *testing.T, endpoint, command string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).
		Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint + "/mcp"}, nil)
	if err != nil {
		t.Fatalf("connecting to the terminal at %s: %v", endpoint, err)
	}
	defer s.Close()
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "shell", Arguments: map[string]any{"command": command}})
	if err != nil || len(res.Content) == 0 {
		t.Fatalf("shell %q: %v", command, err)
	}
	text := res.Content[0].(*mcp.TextContent).Text
	if res.IsError {
		t.Fatalf("shell %q: tool error: %s", command, text)
	}
	return text
}

// needHarborBase skips (fails under CI=true) without the Harbor base image.
func needHarborBase(t *testing.T, cli *client.Client) {
	t.Helper()
	if _, err := cli.ImageInspect(context.Background(), harborBase); err != nil {
		sdktest.Missing(t, "the Harbor test base image "+harborBase, err.Error(), "bash scripts/harbor-base-image.sh (needs debootstrap)")
	}
}

// harborSpec is a Harbor-like task env: an image FROM the base built from
// a folder holding dockerfile, tagged by its content hash as the bundle
// tags Harbor tasks (removed after the test), run with the terminal.
func harborSpec(t *testing.T, cli *client.Client, dockerfile string) sandbox.Spec {
	t.Helper()
	needHarborBase(t, cli)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(dockerfile), 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(dockerfile + t.Name()))
	tag := "agentenv-harbor/test-" + newHex()[:8] + ":" + hex.EncodeToString(sum[:])[:12]
	t.Cleanup(func() {
		_, _ = cli.ImageRemove(context.Background(), tag, client.ImageRemoveOptions{Force: true, PruneChildren: true})
	})
	return sandbox.Spec{
		Env: "harbor-task", Dir: dir, Image: tag, Port: 18765, CPU: 1, MemoryMB: 256,
		Labels: map[string]string{testRunLabel: testRun}, Terminal: &sandbox.Terminal{},
	}
}

// httpGet fetches url's body, failing the test on any error.
func httpGet(t *testing.T, url string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return string(body)
}

// hasDefaultRoute reads a /proc/net/route table: whether a route has the
// empty destination, and whether any route is there at all.
func hasDefaultRoute(t *testing.T, table string) (def, any bool) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(table), "\n")
	if len(lines) == 0 || !strings.HasPrefix(lines[0], "Iface") {
		t.Fatalf("not a routing table: %q", table)
	}
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) < 8 {
			continue
		}
		any = true
		if f[1] == "00000000" && f[7] == "00000000" {
			def = true
		}
	}
	return def, any
}

// A terminal env's container is its image's, running agentenv's terminal
// instead of its entrypoint: the binary bind-mounted read-only, run with
// AGENTENV_PORT and AGENTENV_WORKDIR (the env's workdir, else the image's
// WORKDIR, else /), the root writable, the engine's default capabilities,
// the host's labels; and it has a route out unless told otherwise.
func TestDockerTerminal(t *testing.T) {
	cli := dockertest.Client(t)
	bin, standIn := terminalBin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	p := newDockerPlugin(t, map[string]any{"terminal_binary": bin})
	// An entrypoint that fails: it must never run.
	spec := harborSpec(t, cli, "FROM "+harborBase+"\nWORKDIR /app\nENTRYPOINT [\"/bin/false\"]\nCMD [\"never\"]\n")
	if err := p.Prepare(ctx, spec); err != nil {
		t.Fatal(err)
	}
	ownWorkdir := spec
	ownWorkdir.Terminal = &sandbox.Terminal{Workdir: "/srv/task"}
	// A static image FROM scratch, no WORKDIR, no shell (and quick to
	// create: the vfs driver copies a container's whole image).
	scratch := dockerSpec(t, cli, "")
	scratch.Terminal = &sandbox.Terminal{}
	if err := p.Prepare(ctx, scratch); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		spec    sandbox.Spec
		workdir string
		shell   bool // the image has sh and cat
	}{
		{"the image's WORKDIR", spec, "/app", true},
		{"the env's workdir", ownWorkdir, "/srv/task", true},
		{"no WORKDIR", scratch, "/", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.spec.Labels = map[string]string{testRunLabel: testRun, sandbox.LabelEpisode: "ep-terminal"}
			sb := deploy(t, p, tc.spec)
			if tc.shell {
				// The model's view: its commands run in the workdir, as root.
				want := fmt.Sprintf("stdout:\n%s\n%s\nroot\n", tc.workdir, tc.workdir)
				if got := shell(t, sb.Endpoint, `pwd; echo "$AGENTENV_WORKDIR"; id -un; touch /etc/agentenv-probe`); !strings.Contains(got, want) {
					t.Errorf("the shell tool answered %q, want %q in it", got, want)
				}
			}
			var h dockerHandle
			_ = json.Unmarshal(sb.State, &h)
			ins, err := cli.ContainerInspect(ctx, h.Container, client.ContainerInspectOptions{})
			if err != nil {
				t.Fatal(err)
			}
			cfg, hc := ins.Container.Config, ins.Container.HostConfig
			var mounted bool
			for _, m := range hc.Mounts {
				mounted = mounted || m.Type == mount.TypeBind && m.Source == bin && m.Target == terminalMount && m.ReadOnly
			}
			checks := []struct {
				what string
				ok   bool
			}{
				{"the terminal mounted read-only", mounted},
				{"the terminal as the entrypoint, no arguments", len(cfg.Entrypoint) == 1 && cfg.Entrypoint[0] == terminalMount && len(cfg.Cmd) == 0},
				{"AGENTENV_WORKDIR and AGENTENV_PORT set", contains(cfg.Env, sandbox.EnvWorkdir+"="+tc.workdir) && contains(cfg.Env, "AGENTENV_PORT=18765")},
				{"the workdir as the container's", cfg.WorkingDir == tc.workdir},
				{"a writable root, no tmpfs over /tmp", !hc.ReadonlyRootfs && len(hc.Tmpfs) == 0},
				{"the engine's default capabilities", len(hc.CapDrop) == 0 && len(hc.CapAdd) == 0},
				{"limits from the spec", hc.NanoCPUs == int64(tc.spec.CPU*1e9) && hc.Memory == int64(tc.spec.MemoryMB)<<20},
				{"labelled", cfg.Labels[sandbox.LabelEpisode] == "ep-terminal" && cfg.Labels[LabelSandbox] == sb.ID},
			}
			for _, c := range checks {
				if !c.ok {
					t.Errorf("%s: not so (config %+v, host config %+v)", c.what, cfg, hc)
				}
			}
			if tc.shell {
				r, err := p.Exec(ctx, sb, []string{"cat", "/proc/net/route"})
				if err != nil {
					t.Fatal(err)
				}
				if def, _ := hasDefaultRoute(t, r.Stdout); !def {
					t.Errorf("an env allowed the internet has no default route:\n%s", r.Stdout)
				}
			}
			if err := p.Terminate(ctx, sb); err != nil {
				t.Fatal(err)
			}
			if left := dockerLeft(cli); len(left) > 0 {
				t.Errorf("left after terminate: %v", left)
			}
		})
	}
	// The stand-in, for terminals that misbehave.
	ps := newDockerPlugin(t, map[string]any{"terminal_binary": standIn})
	t.Run("a terminal that exits", func(t *testing.T) {
		bad := scratch
		bad.EnvVars = map[string]string{"TERMINALENV_FAIL": "1"}
		_, err := ps.Deploy(ctx, bad)
		if err == nil || !strings.Contains(err.Error(), "exited (status 3) before listening") || !strings.Contains(err.Error(), "failing to start as asked") {
			t.Fatalf("Deploy = %v, want the exit and the terminal's output", err)
		}
		if left := dockerLeft(cli); len(left) > 0 {
			t.Errorf("a failed deploy left %v", left)
		}
	})
	t.Run("a terminal that never listens", func(t *testing.T) {
		silent := scratch
		silent.EnvVars = map[string]string{"TERMINALENV_SILENT": "1"}
		short, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		if _, err := ps.Deploy(short, silent); err == nil || !strings.Contains(err.Error(), "not listening on port 18765") {
			t.Fatalf("Deploy = %v, want it not listening", err)
		}
		wait.Until(t, "the deploy's objects to go", func() bool { return len(dockerLeft(cli)) == 0 })
	})
	t.Run("a relative workdir", func(t *testing.T) {
		rel := scratch
		rel.Terminal = &sandbox.Terminal{Workdir: "app"}
		if _, err := p.Deploy(ctx, rel); err == nil || !strings.Contains(err.Error(), `workdir "app" is not an absolute path`) {
			t.Fatalf("Deploy = %v", err)
		}
	})
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// A no-internet env's container has no default route (read from its own
// /proc/net/route) and no NET_RAW, while the host still reaches its
// endpoint; the helper that took the route out is gone. A helper that
// cannot do it fails the deploy, leaving nothing.
func TestDockerNoInternet(t *testing.T) {
	cli := dockertest.Client(t)
	bin, _ := terminalBin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	p := newDockerPlugin(t, map[string]any{"terminal_binary": bin})
	routes := func(sb sandbox.Sandbox, cmd ...string) string {
		t.Helper()
		r, err := p.Exec(ctx, sb, cmd)
		if err != nil || r.ExitCode != 0 {
			t.Fatalf("reading the routes: %+v, %v", r, err)
		}
		return r.Stdout
	}
	onlyOwnRoute := func(sb sandbox.Sandbox, table string) {
		t.Helper()
		def, any := hasDefaultRoute(t, table)
		if def || !any {
			t.Errorf("want the subnet's route and no default route; the container's table:\n%s", table)
		}
		helpers, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true,
			Filters: client.Filters{}.Add("label", LabelSandbox+"="+sb.ID).Add("label", LabelHelper)})
		if err != nil || len(helpers.Items) != 0 {
			t.Errorf("helper containers left: %+v, %v", helpers.Items, err)
		}
	}
	t.Run("terminal env", func(t *testing.T) {
		spec := harborSpec(t, cli, "FROM "+harborBase+"\nWORKDIR /app\n")
		spec.NoInternet = true
		if err := p.Prepare(ctx, spec); err != nil {
			t.Fatal(err)
		}
		sb := deploy(t, p, spec)
		// The model's view, through the terminal the host reaches.
		table, ok := strings.CutPrefix(shell(t, sb.Endpoint, "cat /proc/net/route"), "exit code: 0\nstdout:\n")
		if !ok {
			t.Fatalf("shell cat /proc/net/route: %q", table)
		}
		onlyOwnRoute(sb, table)
		var h dockerHandle
		_ = json.Unmarshal(sb.State, &h)
		ins, err := cli.ContainerInspect(ctx, h.Container, client.ContainerInspectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if d := ins.Container.HostConfig.CapDrop; len(d) != 1 || strings.TrimPrefix(d[0], "CAP_") != "NET_RAW" {
			t.Errorf("capabilities dropped %v, want NET_RAW", d)
		}
	})
	// An env of agentenv's own (its image's entrypoint) is cut off alike.
	t.Run("own env", func(t *testing.T) {
		spec := dockerSpec(t, cli, "")
		spec.NoInternet = true
		if err := p.Prepare(ctx, spec); err != nil {
			t.Fatal(err)
		}
		sb := deploy(t, p, spec)
		onlyOwnRoute(sb, routes(sb, "/dockerenv", "read", "/proc/net/route"))
		if got := httpGet(t, sb.Endpoint+"/"); got != "dockerenv\n" {
			t.Errorf("the host reached the env: %q", got)
		}
	})
	t.Run("a helper that cannot", func(t *testing.T) {
		// dockerenv knows no drop-default-routes: it serves until killed.
		bad := newDockerPlugin(t, map[string]any{"terminal_binary": filepath.Join(dockerContext(t), "dockerenv")})
		old := helperTimeout
		helperTimeout = 3 * time.Second
		t.Cleanup(func() { helperTimeout = old })
		spec := dockerSpec(t, cli, "")
		spec.NoInternet = true
		if err := bad.Prepare(ctx, spec); err != nil {
			t.Fatal(err)
		}
		_, err := bad.Deploy(ctx, spec)
		if err == nil || !strings.Contains(err.Error(), "no_internet") || !strings.Contains(err.Error(), "did not finish within 3s") {
			t.Fatalf("Deploy = %v, want the helper's failure", err)
		}
		if left := dockerLeft(cli); len(left) > 0 {
			t.Errorf("a failed deploy left %v", left)
		}
	})
}

// storage_mb goes to the engine as the container's disk size where its
// storage driver can cap it; where it cannot (vfs here) the deploy goes
// on without, and the log says once that storage_mb is not enforced.
func TestDockerStorageMB(t *testing.T) {
	cli := dockertest.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var logBuf lockedLog
	p := newDockerPlugin(t, nil)
	p.SetLogger(hclog.New(&hclog.LoggerOptions{Output: &logBuf, Level: hclog.Warn}))
	spec := dockerSpec(t, cli, "")
	spec.StorageMB = 100
	if err := p.Prepare(ctx, spec); err != nil {
		t.Fatal(err)
	}
	var sizes []string
	for range 2 {
		sb := deploy(t, p, spec)
		var h dockerHandle
		_ = json.Unmarshal(sb.State, &h)
		ins, err := cli.ContainerInspect(ctx, h.Container, client.ContainerInspectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, ins.Container.HostConfig.StorageOpt["size"])
	}
	info, err := cli.Info(ctx, client.InfoOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n := strings.Count(logBuf.String(), "storage_mb is not enforced")
	switch {
	case sizes[0] == "100M" && sizes[1] == "100M":
		if n != 0 {
			t.Errorf("the disk was capped, yet the log says it is not:\n%s", logBuf.String())
		}
	case sizes[0] == "" && sizes[1] == "":
		if n != 1 || !strings.Contains(logBuf.String(), "driver="+info.Info.Driver) {
			t.Errorf("storage driver %s capped nothing; want one warning naming it, got %d:\n%s", info.Info.Driver, n, logBuf.String())
		}
	default:
		t.Errorf("disk sizes %q: want both capped at 100M, or neither", sizes)
	}
}

// A build that runs past the env's build timeout fails with a message
// saying so, and the engine keeps nothing of it (no build container).
func TestDockerBuildTimeout(t *testing.T) {
	cli := dockertest.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	p := newDockerPlugin(t, nil)
	nonce := newHex()
	spec := dockerSpec(t, cli, `RUN ["/dockerenv", "sleep", "600", "`+nonce+`"]`)
	spec.BuildTimeout = 3 * time.Second
	start := time.Now()
	err := p.Prepare(ctx, spec)
	if err == nil || !strings.Contains(err.Error(), "ran past its timeout of 3s") || !strings.Contains(err.Error(), spec.Image) {
		t.Fatalf("Prepare = %v, want the build timeout", err)
	}
	if took := time.Since(start); took > time.Minute {
		t.Errorf("the build was stopped after %s", took)
	}
	buildContainers := func() []string {
		cs, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, c := range cs.Items {
			if strings.Contains(c.Command, nonce) {
				out = append(out, c.ID[:12]+" "+string(c.State))
			}
		}
		return out
	}
	wait.Until(t, "the build's container to go", func() bool { return len(buildContainers()) == 0 })
	if _, found, _ := inspectImage(ctx, cli, spec.Image); found {
		t.Errorf("image %s exists after a timed-out build", spec.Image)
	}
}

// At most parallel_builds images build at once; the others wait, saying
// so; an env whose tag another env built while it waited builds nothing.
func TestDockerParallelBuilds(t *testing.T) {
	cli := dockertest.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var logBuf lockedLog
	p := newDockerPlugin(t, map[string]any{"parallel_builds": 1})
	p.SetLogger(hclog.New(&hclog.LoggerOptions{Output: &logBuf, Level: hclog.Info}))
	var specs []sandbox.Spec
	for i := range 3 {
		spec := dockerSpec(t, cli, `RUN ["/dockerenv", "sleep", "1"]`)
		spec.Env = fmt.Sprintf("env%d", i)
		specs = append(specs, spec)
	}
	twin := specs[0]
	twin.Env = "twin" // the same tag and folder as env0
	specs = append(specs, twin)
	var wg sync.WaitGroup
	errs := make([]error, len(specs))
	for i, spec := range specs {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = p.Prepare(ctx, spec) }()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Prepare %s: %v", specs[i].Env, err)
		}
	}
	running, most, builds := 0, 0, 0
	for _, line := range strings.Split(logBuf.String(), "\n") {
		switch {
		case strings.Contains(line, "building image"):
			running++
			builds++
			most = max(most, running)
		case strings.Contains(line, "image ready"), strings.Contains(line, "image build failed"):
			running--
		}
	}
	log := logBuf.String()
	if most != 1 || builds != 3 {
		t.Errorf("%d builds, at most %d at once; want 3, one at a time:\n%s", builds, most, log)
	}
	if !strings.Contains(log, "waiting for a build turn") || !strings.Contains(log, "parallel_builds=1") {
		t.Errorf("the log does not say that builds waited:\n%s", log)
	}
}

// Envs naming one tag (a Harbor dataset's tasks with one build context)
// build it once, even with build turns to spare.
func TestDockerOneBuildPerTag(t *testing.T) {
	cli := dockertest.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var logBuf lockedLog
	p := newDockerPlugin(t, map[string]any{"parallel_builds": 4})
	p.SetLogger(hclog.New(&hclog.LoggerOptions{Output: &logBuf, Level: hclog.Info}))
	first := dockerSpec(t, cli, `RUN ["/dockerenv", "sleep", "1"]`)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		spec := first
		spec.Env = fmt.Sprintf("task%d", i)
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = p.Prepare(ctx, spec) }()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Prepare task%d: %v", i, err)
		}
	}
	if n := strings.Count(logBuf.String(), "building image"); n != 1 {
		t.Errorf("%d builds of one tag, want 1:\n%s", n, logBuf.String())
	}
}

// Terminates of one container at once (a teardown retried while its first
// call still removes it) all succeed: a removal in progress is waited for,
// not an error.
func TestDockerTerminateWhileRemoving(t *testing.T) {
	cli := dockertest.Client(t)
	p := newDockerPlugin(t, map[string]any{"grace": "0s"})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	spec := dockerSpec(t, cli, "")
	if err := p.Prepare(ctx, spec); err != nil {
		t.Fatal(err)
	}
	for round := range 3 {
		sb, err := p.Deploy(ctx, spec)
		if err != nil {
			t.Fatal(err)
		}
		errs := make([]error, 4)
		var wg sync.WaitGroup
		for i := range errs {
			wg.Add(1)
			go func() { defer wg.Done(); errs[i] = p.Terminate(ctx, sb) }()
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil && !errors.Is(err, sandbox.ErrNotFound) {
				t.Fatalf("round %d, terminate %d: %v", round, i, err)
			}
		}
		if _, err := cli.ContainerInspect(ctx, objectPrefix+sb.ID, client.ContainerInspectOptions{}); !cerrdefs.IsNotFound(err) {
			t.Fatalf("round %d: the container is still there (%v)", round, err)
		}
	}
}
