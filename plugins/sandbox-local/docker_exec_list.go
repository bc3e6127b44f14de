package local

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strconv"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"

	"github.com/agentenv/agentenv/sdk/sandbox"
	"github.com/agentenv/agentenv/sdk/sandbox/hostenv"
)

// execDocker runs cmd in the sandbox's container (as the image's user, in
// its working dir, with the env's environment).
func (p *Plugin) execDocker(ctx context.Context, sb sandbox.Sandbox, cmd []string) (sandbox.ExecResult, error) {
	h, ok := dockerHandleOf(sb)
	if !ok {
		return sandbox.ExecResult{}, fmt.Errorf("sandbox-local: sandbox %q: %w", sb.ID, sandbox.ErrNotFound)
	}
	if len(cmd) == 0 || cmd[0] == "" {
		return sandbox.ExecResult{}, fmt.Errorf("sandbox-local: exec in %s: empty command", sb.ID)
	}
	cli, err := p.engine().client(ctx)
	if err != nil {
		return sandbox.ExecResult{}, fmt.Errorf("sandbox-local: exec in %s: %w", sb.ID, err)
	}
	ctr := h.Container
	if ctr == "" {
		ctr = objectPrefix + sb.ID
	}
	wrap := func(err error) (sandbox.ExecResult, error) {
		if cerrdefs.IsNotFound(err) {
			err = fmt.Errorf("%w: %w", err, sandbox.ErrNotFound)
		}
		return sandbox.ExecResult{}, fmt.Errorf("sandbox-local: exec %q in %s: %w", cmd, sb.ID, err)
	}
	ex, err := cli.ExecCreate(ctx, ctr, client.ExecCreateOptions{Cmd: cmd, AttachStdout: true, AttachStderr: true})
	if err != nil {
		return wrap(err)
	}
	att, err := cli.ExecAttach(ctx, ex.ID, client.ExecAttachOptions{})
	if err != nil {
		return wrap(err)
	}
	defer att.Close()
	// A cancelled exec stops reading; the command itself runs on in the
	// container until it exits or the sandbox is terminated.
	stop := context.AfterFunc(ctx, att.Close)
	defer stop()
	stdout, stderr := hostenv.NewCappedBuffer(execOutputMax), hostenv.NewCappedBuffer(execOutputMax)
	_, copyErr := stdcopy.StdCopy(stdout, stderr, att.Reader)
	res := sandbox.ExecResult{Stdout: stdout.String(), Stderr: stderr.String()}
	if ctx.Err() != nil {
		return res, fmt.Errorf("sandbox-local: exec %q in %s: %w", cmd, sb.ID, ctx.Err())
	}
	if copyErr != nil {
		return res, fmt.Errorf("sandbox-local: exec %q in %s: reading its output: %w", cmd, sb.ID, copyErr)
	}
	ins, err := cli.ExecInspect(ctx, ex.ID, client.ExecInspectOptions{})
	if err != nil {
		return res, fmt.Errorf("sandbox-local: exec %q in %s: %w", cmd, sb.ID, err)
	}
	res.ExitCode = ins.ExitCode
	return res, nil
}

// listDocker returns this plugin's containers and networks carrying all of
// labels, one handle per sandbox: a network whose container is gone (a
// deploy killed half-way) is listed too, so reaping removes it.
func (p *Plugin) listDocker(ctx context.Context, cli *client.Client, labels map[string]string) ([]sandbox.Sandbox, error) {
	f := client.Filters{}.Add("label", LabelSandbox)
	for k, v := range labels {
		f = f.Add("label", k+"="+v)
	}
	ctrs, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		return nil, fmt.Errorf("sandbox-local: listing containers: %w", err)
	}
	nets, err := cli.NetworkList(ctx, client.NetworkListOptions{Filters: f})
	if err != nil {
		return nil, fmt.Errorf("sandbox-local: listing networks: %w", err)
	}
	type found struct {
		sb sandbox.Sandbox
		h  dockerHandle
	}
	byID := map[string]*found{}
	get := func(id string, lbl map[string]string) *found {
		if byID[id] == nil {
			l := hostenv.CopyLabels(lbl)
			delete(l, LabelSandbox)
			byID[id] = &found{sb: sandbox.Sandbox{ID: id, Labels: l}}
		}
		return byID[id]
	}
	for _, c := range ctrs.Items {
		id := c.Labels[LabelSandbox]
		if !isDocker(id) {
			continue
		}
		f := get(id, c.Labels)
		if c.Labels[LabelHelper] != "" {
			delete(f.sb.Labels, LabelHelper)
			continue // listed for reaping; removeDocker removes it by name
		}
		f.h.Container = c.ID
		for _, pt := range c.Ports {
			if pt.PublicPort != 0 && pt.IP == localhost {
				f.sb.Endpoint = "http://" + net.JoinHostPort(localhost.String(), strconv.Itoa(int(pt.PublicPort)))
			}
		}
	}
	for _, n := range nets.Items {
		id := n.Labels[LabelSandbox]
		if !isDocker(id) {
			continue
		}
		f := get(id, n.Labels)
		f.h.Network = n.ID
		if len(n.IPAM.Config) > 0 {
			f.h.Subnet = n.IPAM.Config[0].Subnet.String()
		}
	}
	out := make([]sandbox.Sandbox, 0, len(byID))
	for _, f := range byID {
		f.sb.State = f.h.state()
		out = append(out, f.sb)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}
