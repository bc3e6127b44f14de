package standin

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/containerd/errdefs"
	containertypes "github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
)

// Labels on everything the Docker runner creates: the stand-in's process,
// so a later one removes what a killed one left.
const (
	labelOwner = "agentenv.ecs-standin"
	labelPID   = "agentenv.ecs-standin.pid"
	labelTask  = "agentenv.ecs-standin.task"
)

// Docker runs tasks' containers on the local Docker engine, on a network of
// its own (an engine run with --bridge=none publishes no ports for
// containers left on the default network).
type Docker struct {
	cli     *client.Client
	owner   string
	network string
}

// NewDocker connects to the engine named by DOCKER_HOST (default the local
// socket), removes what killed stand-ins left, and creates its network.
func NewDocker(ctx context.Context) (*Docker, error) {
	cli, err := client.New(client.FromEnv)
	if err != nil {
		return nil, fmt.Errorf("docker: %w", err)
	}
	if _, err := cli.Ping(ctx, client.PingOptions{}); err != nil {
		_ = cli.Close()
		return nil, fmt.Errorf("docker engine not reachable (is dockerd running?): %w", err)
	}
	d := &Docker{cli: cli, owner: "standin-" + newID()[:12]}
	d.reapOrphans(ctx)
	if d.network, err = d.createNetwork(ctx); err != nil {
		_ = cli.Close()
		return nil, fmt.Errorf("docker: creating the stand-in's network: %w", err)
	}
	return d, nil
}

// createNetwork creates the stand-in's network from the engine's default
// address pools, or, when other networks have used those up, from a /24 of
// Docker's default 172.16.0.0/12 picked at random (a subnet another
// network holds is refused, and another is tried).
func (d *Docker) createNetwork(ctx context.Context) (string, error) {
	opts := client.NetworkCreateOptions{Driver: "bridge",
		Labels: map[string]string{labelOwner: d.owner, labelPID: strconv.Itoa(os.Getpid())}}
	created, err := d.cli.NetworkCreate(ctx, d.owner, opts)
	for try := 0; err != nil && try < 16; try++ {
		subnet := netip.PrefixFrom(netip.AddrFrom4([4]byte{172, byte(16 + mrand.IntN(16)), byte(mrand.IntN(256)), 0}), 24)
		opts.IPAM = &network.IPAM{Config: []network.IPAMConfig{{Subnet: subnet}}}
		created, err = d.cli.NetworkCreate(ctx, d.owner, opts)
	}
	return created.ID, err
}

// reapOrphans removes the containers and networks of stand-ins whose
// process is gone.
func (d *Docker) reapOrphans(ctx context.Context) {
	dead := func(labels map[string]string) bool {
		pid, err := strconv.Atoi(labels[labelPID])
		return err == nil && pid > 0 && errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
	}
	cs, err := d.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: client.Filters{}.Add("label", labelPID)})
	if err == nil {
		for _, c := range cs.Items {
			if dead(c.Labels) {
				_, _ = d.cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true})
			}
		}
	}
	ns, err := d.cli.NetworkList(ctx, client.NetworkListOptions{Filters: client.Filters{}.Add("label", labelPID)})
	if err == nil {
		for _, n := range ns.Items {
			if dead(n.Labels) {
				_, _ = d.cli.NetworkRemove(ctx, n.ID, client.NetworkRemoveOptions{})
			}
		}
	}
}

// Start creates and starts the task's container with its ports published
// on the task's address.
func (d *Docker) Start(ctx context.Context, spec RunSpec) (Container, error) {
	exposed := network.PortSet{}
	bindings := network.PortMap{}
	for _, p := range spec.Ports {
		port, err := network.ParsePort(strconv.Itoa(p) + "/tcp")
		if err != nil {
			return nil, err
		}
		exposed[port] = struct{}{}
		bindings[port] = []network.PortBinding{{HostIP: spec.IP, HostPort: strconv.Itoa(p)}}
	}
	created, err := d.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name: d.owner + "-" + spec.Task,
		Config: &containertypes.Config{
			Image: spec.Image, Cmd: spec.Command, Env: spec.Env, ExposedPorts: exposed,
			Labels: map[string]string{labelOwner: d.owner, labelPID: strconv.Itoa(os.Getpid()), labelTask: spec.Task},
		},
		HostConfig: &containertypes.HostConfig{NetworkMode: containertypes.NetworkMode(d.network), PortBindings: bindings},
	})
	if errdefs.IsNotFound(err) {
		return nil, fmt.Errorf("%s: %w", spec.Image, ErrNoImage)
	}
	if err != nil {
		return nil, err
	}
	c := &dockerContainer{d: d, id: created.ID, exited: make(chan int, 1)}
	if _, err := d.cli.ContainerStart(ctx, c.id, client.ContainerStartOptions{}); err != nil {
		_ = c.remove(context.WithoutCancel(ctx))
		return nil, err
	}
	go c.wait()
	return c, nil
}

// Close removes every container of this runner and its network.
func (d *Docker) Close(ctx context.Context) error {
	var errs []error
	cs, err := d.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: client.Filters{}.Add("label", labelOwner+"="+d.owner)})
	if err != nil {
		errs = append(errs, err)
	} else {
		for _, c := range cs.Items {
			if _, err := d.cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true}); err != nil && !errdefs.IsNotFound(err) {
				errs = append(errs, err)
			}
		}
	}
	if _, err := d.cli.NetworkRemove(ctx, d.network, client.NetworkRemoveOptions{}); err != nil && !errdefs.IsNotFound(err) {
		errs = append(errs, err)
	}
	errs = append(errs, d.cli.Close())
	return errors.Join(errs...)
}

// Containers lists the ids of this runner's containers the engine still
// has, running or not.
func (d *Docker) Containers(ctx context.Context) ([]string, error) {
	cs, err := d.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: client.Filters{}.Add("label", labelOwner+"="+d.owner)})
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, c := range cs.Items {
		ids = append(ids, c.ID)
	}
	return ids, nil
}

type dockerContainer struct {
	d      *Docker
	id     string
	exited chan int
}

func (c *dockerContainer) Exited() <-chan int { return c.exited }

// wait reports the container's exit code once it stops.
func (c *dockerContainer) wait() {
	res := c.d.cli.ContainerWait(context.Background(), c.id, client.ContainerWaitOptions{Condition: containertypes.WaitConditionNotRunning})
	select {
	case r := <-res.Result:
		c.exited <- int(r.StatusCode)
	case <-res.Error:
		c.exited <- -1
	}
}

func (c *dockerContainer) Stop(ctx context.Context, grace time.Duration) error {
	secs := max(int(grace.Seconds()), 0)
	_, err := c.d.cli.ContainerStop(ctx, c.id, client.ContainerStopOptions{Timeout: &secs})
	return errors.Join(ignoreNotFound(err), c.remove(ctx))
}

func (c *dockerContainer) remove(ctx context.Context) error {
	_, err := c.d.cli.ContainerRemove(ctx, c.id, client.ContainerRemoveOptions{Force: true})
	return ignoreNotFound(err)
}

func ignoreNotFound(err error) error {
	if errdefs.IsNotFound(err) {
		return nil
	}
	return err
}

// BuildImage builds the image tag from the Dockerfile in dir, with only the
// named files of dir in the build context (what the Dockerfile copies).
func (d *Docker) BuildImage(ctx context.Context, dir, tag string, files ...string) error {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, name := range append([]string{"Dockerfile"}, files...) {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return fmt.Errorf("build context: %w", err)
		}
		info, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Name: filepath.ToSlash(name), Mode: int64(info.Mode().Perm()), Size: int64(len(b))}); err != nil {
			return err
		}
		if _, err := tw.Write(b); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	res, err := d.cli.ImageBuild(ctx, &buf, client.ImageBuildOptions{Tags: []string{tag}, Remove: true, ForceRemove: true})
	if err != nil {
		return fmt.Errorf("docker build %s: %w", tag, err)
	}
	defer res.Body.Close()
	// The build's progress is a stream of JSON messages; an error is one.
	var tail []string
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var msg struct {
			Stream string `json:"stream"`
			Error  string `json:"error"`
		}
		if json.Unmarshal(sc.Bytes(), &msg) != nil {
			continue
		}
		if msg.Error != "" {
			return fmt.Errorf("docker build %s: %s (output: %s)", tag, msg.Error, strings.Join(tail, ""))
		}
		tail = append(tail, msg.Stream)
		if len(tail) > 20 {
			tail = tail[1:]
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("docker build %s: %w", tag, err)
	}
	_, err = io.Copy(io.Discard, res.Body)
	return err
}
