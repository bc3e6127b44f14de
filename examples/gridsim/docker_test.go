package gridsim_test

// GridSim in Docker, end to end: the real agentenv binary serves a copy of
// this bundle with the local sandbox in Docker mode (its env.toml points
// at an image tag of the run's own, so the bundle's Dockerfile is built by
// the sandbox's Prepare and used), played over the OpenEnv WebSocket
// protocol. Needs a Docker engine: skipped without one, failed under CI.

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/agentenv/agentenv/core/runtime"
	"github.com/agentenv/agentenv/sdk/sandbox"

	agentclient "github.com/agentenv/agentenv/client"
	"github.com/agentenv/agentenv/examples/gridsim/baseline"
	"github.com/agentenv/agentenv/internal/servetest"
	"github.com/agentenv/agentenv/plugins/sandbox-local/dockertest"
)

// dockerRig is what the Docker tests share, made once: the agentenv binary
// and the bundle copy with its own image tag.
var dockerRig struct {
	once    sync.Once
	err     error
	tmp     string
	bin     string
	bundle  string
	image   string
	started bool // a server has started (the first one builds the image)
}

// setupDocker builds agentenv and copies the bundle, its env.toml pointing
// at a fresh image tag and building the env binary from this folder.
func setupDocker(t *testing.T) {
	t.Helper()
	bin := servetest.Binary(t)
	dockerRig.once.Do(func() {
		r := &dockerRig
		if r.tmp, r.err = os.MkdirTemp("", "gridsim-docker-"); r.err != nil {
			return
		}
		r.bin = bin
		src, _ := filepath.Abs(".")
		r.bundle = filepath.Join(r.tmp, "gridsim")
		if r.err = os.CopyFS(r.bundle, os.DirFS(src)); r.err != nil {
			return
		}
		os.RemoveAll(filepath.Join(r.bundle, "envs", "gridsim", "bin"))
		var b [6]byte
		_, _ = rand.Read(b[:])
		r.image = "agentenv-gridsim-env:test-" + hex.EncodeToString(b[:])
		envToml := filepath.Join(r.bundle, "envs", "gridsim", "env.toml")
		data, err := os.ReadFile(envToml)
		if r.err = err; err != nil {
			return
		}
		out := filepath.Join(r.bundle, "envs", "gridsim", "bin", "gridsim-env")
		text := regexp.MustCompile(`(?m)^build = .*$`).ReplaceAllString(string(data),
			fmt.Sprintf(`build = ["env", "CGO_ENABLED=0", "go", "build", "-C", %q, "-trimpath", "-o", %q, "."]`, filepath.Join(src, "envs", "gridsim"), out))
		text = regexp.MustCompile(`(?m)^image = .*$`).ReplaceAllString(text, fmt.Sprintf("image = %q", r.image))
		r.err = os.WriteFile(envToml, []byte(text), 0o644)
	})
	if dockerRig.err != nil {
		t.Fatal(dockerRig.err)
	}
}

func TestMain(m *testing.M) {
	code := servetest.Main(m)
	teardownDocker()
	os.Exit(code)
}

// teardownDocker removes what setupDocker made.
func teardownDocker() {
	r := &dockerRig
	if r.image != "" {
		if cli, err := client.New(client.FromEnv); err == nil {
			_, _ = cli.ImageRemove(context.Background(), r.image, client.ImageRemoveOptions{Force: true, PruneChildren: true})
			cli.Close()
		}
	}
	if r.tmp != "" {
		os.RemoveAll(r.tmp)
	}
}

// dockerServer is one `agentenv serve` of the bundle copy in Docker mode.
type dockerServer struct {
	*servetest.Server
	addr string
	id   string // its server id (sandbox.LabelServer)
	log  *servetest.Buffer
}

func freeAddr(t *testing.T) string { return servetest.FreeAddr(t) }

// serveDocker starts agentenv serve (caches in cache, so a restart finds
// its claim) and waits until it is healthy. The cleanup drains it as a
// SIGTERM would (a failed test must not leave containers), then removes
// and reports whatever is still there.
func serveDocker(t *testing.T, addr, cache string, args ...string) *dockerServer {
	t.Helper()
	setupDocker(t)
	id, err := runtime.ServerID(dockerRig.bundle, addr)
	if err != nil {
		t.Fatal(err)
	}
	// Registered first, so it runs after the server's own cleanup.
	t.Cleanup(func() {
		if left := removeLeft(id); len(left) > 0 {
			t.Errorf("server %s left %v (now removed)", id, left)
		}
	})
	s := servetest.Launch(t, servetest.Options{
		Bin: dockerRig.bin, Bundle: dockerRig.bundle, Addr: addr, Env: []string{"XDG_CACHE_HOME=" + cache},
		Args:  append([]string{"--sandbox", "local", "--sandbox-config", "mode=docker", "--sandbox-config", "state_dir=" + filepath.Join(cache, "state")}, args...),
		Drain: 2 * time.Minute,
	})
	s.WaitReady(t, 5*time.Minute) // the first start builds the image
	dockerRig.started = true
	return &dockerServer{Server: s, addr: addr, id: id, log: s.Log}
}

// stop signals the server and waits for it to exit, returning its code.
func (s *dockerServer) stop(t *testing.T, sig syscall.Signal) int {
	t.Helper()
	return s.Stop(t, sig, 2*time.Minute)
}

// objects lists the containers and networks labelled with server id.
func objects(t *testing.T, cli *client.Client, id string) (containers, networks []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f := client.Filters{}.Add("label", sandbox.LabelServer+"="+id)
	cs, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs.Items {
		containers = append(containers, c.ID)
	}
	ns, err := cli.NetworkList(ctx, client.NetworkListOptions{Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range ns.Items {
		networks = append(networks, n.ID)
	}
	return containers, networks
}

// removeLeft removes the containers and networks labelled with server id,
// returning what it found.
func removeLeft(id string) []string {
	cli, err := client.New(client.FromEnv)
	if err != nil {
		return nil
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	f := client.Filters{}.Add("label", sandbox.LabelServer+"="+id)
	var left []string
	if cs, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f}); err == nil {
		for _, c := range cs.Items {
			left = append(left, "container "+c.ID[:12])
			_, _ = cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true})
		}
	}
	if ns, err := cli.NetworkList(ctx, client.NetworkListOptions{Filters: f}); err == nil {
		for _, n := range ns.Items {
			left = append(left, "network "+n.Name)
			_, _ = cli.NetworkRemove(ctx, n.ID, client.NetworkRemoveOptions{})
		}
	}
	return left
}

// sessionCaller makes the policy's tool calls as a model does: one hermes
// tool call per reply, through the server.
type sessionCaller struct{ s *agentclient.Session }

func (c sessionCaller) Call(ctx context.Context, tool string, args any) (string, bool, error) {
	raw, err := json.Marshal(map[string]any{"name": tool, "arguments": args})
	if err != nil {
		return "", false, err
	}
	res, err := c.s.Step(ctx, "<tool_call>\n"+string(raw)+"\n</tool_call>")
	if err != nil {
		return "", false, err
	}
	if len(res.Observation.Messages) != 1 {
		return "", false, fmt.Errorf("%s: %d messages, want one tool message", tool, len(res.Observation.Messages))
	}
	text := res.Observation.Messages[0].Content
	isErr := strings.HasPrefix(text, "Error: ")
	return strings.TrimPrefix(text, "Error: "), isErr, nil
}

// playOptimal plays task on s with the optimal policy and returns the
// reward.
func playOptimal(ctx context.Context, s *agentclient.Session, task string, reset bool) (float64, error) {
	if reset {
		if _, err := s.Reset(ctx, agentclient.ResetRequest{TaskID: task}); err != nil {
			return 0, fmt.Errorf("reset %s: %w", task, err)
		}
	}
	if _, err := baseline.Play(ctx, sessionCaller{s}, baseline.Optimal{}, task); err != nil {
		return 0, fmt.Errorf("%s: %w", task, err)
	}
	res, err := s.Step(ctx, "The schedule is submitted.")
	if err != nil {
		return 0, fmt.Errorf("%s: the final reply: %w", task, err)
	}
	if !res.Done || res.Reward == nil {
		return 0, fmt.Errorf("%s: not done after the final reply: %+v", task, res)
	}
	return *res.Reward, nil
}

func dial(t *testing.T, addr string) *agentclient.Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := agentclient.Dial(ctx, "http://"+addr, agentclient.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// GridSim end to end in Docker: the image is built from the bundle's
// Dockerfile at start, the episode's env runs in a locked-down container
// on its own network, the optimal policy scores 1, and SIGTERM leaves no
// container or network.
func TestServeDockerOptimalScoresOne(t *testing.T) {
	cli := dockertest.Client(t)
	first := !dockerRig.started
	s := serveDocker(t, freeAddr(t), t.TempDir())
	log := s.log.String()
	wants := []string{"mode docker: every env runs in a container"}
	if first {
		wants = append(wants, "building image", "COPY bin/gridsim-env /gridsim-env", "image ready")
	}
	for _, w := range wants {
		if !strings.Contains(log, w) {
			t.Errorf("serve's log lacks %q:\n%s", w, log)
		}
	}
	// The host re-emits a plugin's fields in its own order.
	if !modeLine(log, dockerRig.image) {
		t.Errorf("serve's log does not say the env runs in docker mode:\n%s", log)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sess := dial(t, s.addr)
	if _, err := sess.Reset(ctx, agentclient.ResetRequest{TaskID: "day/eval-001"}); err != nil {
		t.Fatal(err)
	}
	containers, networks := objects(t, cli, s.id)
	if len(containers) != 1 || len(networks) != 1 {
		t.Fatalf("one live episode: %d containers, %d networks", len(containers), len(networks))
	}
	ins, err := cli.ContainerInspect(ctx, containers[0], client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if img := ins.Container.Config.Image; img != dockerRig.image {
		t.Errorf("the container runs %s, want %s", img, dockerRig.image)
	}
	hc := ins.Container.HostConfig
	if !hc.ReadonlyRootfs || len(hc.CapDrop) != 1 || hc.NanoCPUs != 250_000_000 || hc.Memory != 64<<20 {
		t.Errorf("container limits %+v", hc.Resources)
	}
	reward, err := playOptimal(ctx, sess, "day/eval-001", false)
	if err != nil {
		t.Fatalf("%v\n%s", err, s.log)
	}
	if reward != 1 {
		t.Fatalf("the optimal policy scored %v, want 1", reward)
	}
	if code := s.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("exit %d:\n%s", code, s.log)
	}
	if c, n := objects(t, cli, s.id); len(c)+len(n) > 0 {
		t.Fatalf("left after SIGTERM: containers %v, networks %v", c, n)
	}
}

// SIGKILL with 32 live Docker episodes leaves their containers; the next
// start of the same server reaps every one, networks included.
func TestServeDockerSigkillThenRestartLeavesNothing(t *testing.T) {
	cli := dockertest.Client(t)
	addr, cache := freeAddr(t), t.TempDir()
	s := serveDocker(t, addr, cache, "--max-concurrent-envs", "32")
	const live = 32
	var wg sync.WaitGroup
	errs := make(chan error, live)
	for i := range live {
		sess := dial(t, addr)
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			if _, err := sess.Reset(ctx, agentclient.ResetRequest{Split: "train", Index: i}); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("reset: %v", err)
	}
	if c, n := objects(t, cli, s.id); len(c) != live || len(n) != live {
		t.Fatalf("%d live episodes: %d containers, %d networks", live, len(c), len(n))
	}
	s.stop(t, syscall.SIGKILL)
	if c, _ := objects(t, cli, s.id); len(c) == 0 {
		t.Fatal("SIGKILL left no container: nothing to reap, the test proves nothing")
	}
	again := serveDocker(t, addr, cache)
	if c, n := objects(t, cli, s.id); len(c)+len(n) > 0 {
		t.Fatalf("after the restart: %d containers, %d networks left of the killed server", len(c), len(n))
	}
	if !strings.Contains(again.log.String(), "reaped sandboxes an earlier run left behind") || !strings.Contains(again.log.String(), "count="+strconv.Itoa(live)) {
		t.Errorf("the restart did not log reaping %d sandboxes:\n%s", live, again.log)
	}
	if code := again.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

// Many GridSim episodes live at once, each with its own network (far past
// the ~30 networks of the engine's default address pools), all scoring,
// and the engine's configuration untouched. AGENTENV_DOCKER_EPISODES sets
// how many (default 40; docs/performance.md reports 200).
func TestServeDockerManyEpisodesAtOnce(t *testing.T) {
	cli := dockertest.Client(t)
	n := 40
	if v := os.Getenv("AGENTENV_DOCKER_EPISODES"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("AGENTENV_DOCKER_EPISODES=%q: want a positive number", v)
		}
	}
	config := daemonConfig(t)
	addr := freeAddr(t)
	s := serveDocker(t, addr, t.TempDir(), "--max-concurrent-envs", strconv.Itoa(n))
	sessions := make([]*agentclient.Session, n)
	for i := range sessions {
		sessions[i] = dial(t, addr)
	}
	start := time.Now()
	run := func(f func(i int) error) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := f(i); err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("%v\n(server log tail)\n%s", err, tail(s.log.String(), 3000))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	task := func(i int) string { return fmt.Sprintf("day/train-%04d", i%2000+1) }
	run(func(i int) error {
		_, err := sessions[i].Reset(ctx, agentclient.ResetRequest{TaskID: task(i)})
		return err
	})
	allLive := time.Since(start)
	containers, networks := objects(t, cli, s.id)
	if len(containers) != n || len(networks) != n {
		t.Fatalf("%d live episodes: %d containers, %d networks", n, len(containers), len(networks))
	}
	subnets := map[netip.Prefix]bool{}
	for _, id := range networks {
		nw, err := cli.NetworkInspect(ctx, id, client.NetworkInspectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		subnets[nw.Network.IPAM.Config[0].Subnet] = true
	}
	if len(subnets) != n {
		t.Fatalf("%d networks share %d subnets", n, len(subnets))
	}
	rewards := make([]float64, n)
	run(func(i int) error {
		r, err := playOptimal(ctx, sessions[i], task(i), false)
		rewards[i] = r
		return err
	})
	for i, r := range rewards {
		if r != 1 {
			t.Errorf("%s scored %v with the optimal policy, want 1", task(i), r)
		}
	}
	t.Logf("%d episodes live at once after %s; all played in %s", n, allLive.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	if code := s.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if c, nw := objects(t, cli, s.id); len(c)+len(nw) > 0 {
		t.Fatalf("left after SIGTERM: %d containers, %d networks", len(c), len(nw))
	}
	if after := daemonConfig(t); after != config {
		t.Fatalf("the engine's configuration changed: %s → %s", config, after)
	}
}

// modeLine reports whether a line of log says env gridsim (image) runs in
// Docker mode, whatever the order of its fields.
func modeLine(log, image string) bool {
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, "env mode:") && strings.Contains(line, "env=gridsim") &&
			strings.Contains(line, "image="+image) && strings.Contains(line, "mode=docker") {
			return true
		}
	}
	return false
}

// daemonConfig fingerprints the engine's configuration file (absent is a
// state too): the SkyRL page's fix for network exhaustion edits it.
func daemonConfig(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("/etc/docker/daemon.json")
	if os.IsNotExist(err) {
		return "no /etc/docker/daemon.json"
	}
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	return "daemon.json sha256 " + hex.EncodeToString(sum[:])
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
