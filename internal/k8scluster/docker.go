package k8scluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"time"
)

// ImportDockerImage copies ref from the local Docker engine into the
// nodes' containerd (`docker save`, then `ctr images import` into each),
// for images that are not FROM scratch: a Harbor task's, built FROM a
// Debian base. The kubelet finds it under ref as NormalizeRef spells it.
func (c *Cluster) ImportDockerImage(ctx context.Context, ref string) error {
	socks, err := c.containerdSockets(ref)
	if err != nil {
		return err
	}
	for _, s := range socks {
		if _, err := os.Stat(s); err != nil {
			return fmt.Errorf("import image %s: the node's containerd socket: %w (is the cluster up?)", ref, err)
		}
	}
	tmp, err := os.CreateTemp("", "agentenv-k8s-docker-*.tar")
	if err != nil {
		return err
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	type step struct {
		name string
		cmd  *exec.Cmd
		hint string
	}
	steps := []step{{"docker save", exec.CommandContext(ctx, "docker", "save", "-o", tmp.Name(), ref), "is Docker running, and does it have the image?"}}
	for _, s := range socks {
		steps = append(steps, step{"ctr images import", exec.CommandContext(ctx, "ctr", "-a", s, "-n", "k8s.io", "images", "import", tmp.Name()),
			"ctr comes with Debian's containerd package"})
	}
	for _, step := range steps {
		out, err := step.cmd.CombinedOutput()
		if err != nil {
			var ee *exec.Error
			if errors.As(err, &ee) {
				return fmt.Errorf("import image %s: %w (%s)", ref, err, step.hint)
			}
			return fmt.Errorf("import image %s: %s: %w: %s", ref, step.name, err, bytes.TrimSpace(out))
		}
	}
	return nil
}
