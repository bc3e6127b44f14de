package local

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"path/filepath"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/jsonstream"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/agentenv/agentenv/sdk/sandbox"
)

// terminalMount is where agentenv's terminal binary is bind-mounted
// (read-only) in a container that runs it.
const terminalMount = sandbox.TerminalMountPath

// dropRoutesArg, as its only argument, makes the terminal binary take the
// default routes out of its network namespace (cmd/agentenv-terminal's
// droproutes.go): the no-route helper runs it so.
const dropRoutesArg = "drop-default-routes"

// findTerminal finds agentenv's terminal binary when the config names
// none (a variable for tests).
var findTerminal = sandbox.FindTerminalBinary

// checkTerminalBinary returns bin's absolute path (links resolved, as a
// bind mount needs it) once it is a static executable for this machine:
// it runs in images whatever their libc, or none.
func checkTerminalBinary(bin string) (string, error) {
	if err := sandbox.CheckTerminalBinary(bin); err != nil {
		return "", err
	}
	abs, err := filepath.Abs(bin)
	if err == nil {
		abs, err = filepath.EvalSymlinks(abs)
	}
	if err != nil {
		return "", fmt.Errorf("terminal binary %s: %w", bin, err)
	}
	return abs, nil
}

// terminalBinary is the terminal binary this plugin injects: the config's,
// else the one findTerminal finds (remembered once found).
func (p *Plugin) terminalBinary() (string, error) {
	p.mu.Lock()
	bin := p.cfg.TerminalBinary
	if bin == "" {
		bin = p.terminal
	}
	p.mu.Unlock()
	if bin != "" {
		return bin, nil
	}
	bin, err := findTerminal()
	if err != nil {
		return "", err
	}
	p.mu.Lock()
	p.terminal = bin
	p.mu.Unlock()
	return bin, nil
}

// terminalWorkdir is where a terminal env's commands run: the env's
// workdir, else the image's WORKDIR, else /.
func terminalWorkdir(spec sandbox.Spec, img imageInfo) (string, error) {
	wd := spec.Terminal.Workdir
	if wd == "" {
		wd = img.workdir
	}
	if wd == "" {
		return "/", nil
	}
	if !path.IsAbs(wd) {
		return "", fmt.Errorf("workdir %q is not an absolute path in the container", wd)
	}
	return path.Clean(wd), nil
}

// withTerminal makes a container run agentenv's terminal instead of its
// image's entrypoint: the binary mounted read-only, run as the entrypoint
// with no arguments, in workdir. The image's own environment stays.
func withTerminal(cfg *container.Config, hc *container.HostConfig, bin, workdir string) {
	cfg.Entrypoint = []string{terminalMount}
	cfg.Cmd = nil // an entrypoint given at create drops the image's CMD too
	cfg.WorkingDir = workdir
	cfg.Env = append(cfg.Env, sandbox.EnvWorkdir+"="+workdir)
	hc.Mounts = append(hc.Mounts, mount.Mount{Type: mount.TypeBind, Source: bin, Target: terminalMount, ReadOnly: true})
}

// The no-route helper. Docker's bridge networks (Engine 20.10 even when
// `internal`) give every container a default route through the host, and
// the engine has no setting to leave it out. So a no-internet container is
// started as any other and, before its deploy returns, a one-shot helper
// container joins its network namespace with CAP_NET_ADMIN alone and runs
// the terminal binary's `drop-default-routes`: the container then has a
// route to its own subnet only (the host's port proxy still reaches it),
// and no capability to put one back.

// helperImage is an image with no files, the helper's root: the helper
// runs the bind-mounted static binary, so it needs no image of its own, and
// an empty one costs the engine nothing to copy (vfs copies a container's
// whole image).
const helperImage = "agentenv-helper/empty:1"

// LabelHelper marks the helper containers of a sandbox (value: what the
// helper does); they carry the sandbox's labels too, so reaping finds a
// helper a killed deploy left.
const LabelHelper = "agentenv.helper"

// helperTimeout bounds one helper run, from its creation to its removal.
var helperTimeout = 20 * time.Second

// helperName is the name of sandbox id's no-route helper container.
func helperName(id string) string { return objectPrefix + id + "-noroute" }

// ensureHelperImage imports the empty helper image when the engine lacks
// it, once however many deploys ask at once.
func (e *engine) ensureHelperImage(ctx context.Context, cli *client.Client) error {
	_, err, _ := e.helper.Do(helperImage, func() (any, error) {
		if _, err := cli.ImageInspect(ctx, helperImage); err == nil {
			return nil, nil
		} else if !cerrdefs.IsNotFound(err) {
			return nil, fmt.Errorf("inspecting image %s: %w", helperImage, err)
		}
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		_ = tw.WriteHeader(&tar.Header{Name: ".agentenv/", Typeflag: tar.TypeDir, Mode: 0o755})
		_ = tw.Close()
		res, err := cli.ImageImport(ctx, client.ImageImportSource{Source: &buf, SourceName: "-"}, helperImage,
			client.ImageImportOptions{Changes: []string{"LABEL " + LabelHelper + "=image"}, Message: "agentenv sandbox-local helper: an empty root"})
		if err != nil {
			return nil, fmt.Errorf("importing the helper image %s: %w", helperImage, err)
		}
		defer res.Close()
		if err := readStreamError(res); err != nil {
			return nil, fmt.Errorf("importing the helper image %s: %w", helperImage, err)
		}
		e.log.Info("imported the no-route helper's image (empty)", "image", helperImage)
		return nil, nil
	})
	return err
}

// readStreamError reads an engine's JSON message stream to its end and
// returns the error it carries, if any.
func readStreamError(r io.Reader) error {
	dec := json.NewDecoder(r)
	for {
		var m jsonstream.Message
		if err := dec.Decode(&m); err == io.EOF {
			return nil
		} else if err != nil {
			return fmt.Errorf("reading the engine's answer: %w", err)
		}
		if m.Error != nil {
			return errors.New(m.Error.Message)
		}
	}
}

// dropRoutes takes the default routes out of container ctr's network
// namespace with the no-route helper, and checks that it did.
func (p *Plugin) dropRoutes(ctx context.Context, cli *client.Client, id, ctr, bin string, labels map[string]string) error {
	eng := p.engine()
	if err := eng.ensureHelperImage(ctx, cli); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, helperTimeout)
	defer cancel()
	name := helperName(id)
	hl := make(map[string]string, len(labels)+1)
	for k, v := range labels {
		hl[k] = v
	}
	hl[LabelHelper] = "noroute"
	created, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name: name,
		Config: &container.Config{Image: helperImage, User: "0:0", Labels: hl,
			Entrypoint: []string{terminalMount, dropRoutesArg}},
		HostConfig: &container.HostConfig{
			NetworkMode:    container.NetworkMode("container:" + ctr),
			CapDrop:        []string{"ALL"},
			CapAdd:         []string{"NET_ADMIN"},
			SecurityOpt:    []string{"no-new-privileges"},
			ReadonlyRootfs: true,
			Mounts:         []mount.Mount{{Type: mount.TypeBind, Source: bin, Target: terminalMount, ReadOnly: true}},
			LogConfig:      container.LogConfig{Type: "json-file"},
		},
	})
	if err != nil {
		return fmt.Errorf("creating the no-route helper: %w", err)
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		if _, err := cli.ContainerRemove(rctx, created.ID, client.ContainerRemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
			p.log.Warn("removing the no-route helper", "id", id, "error", err)
		}
	}()
	if _, err := cli.ContainerStart(ctx, created.ID, client.ContainerStartOptions{}); err != nil {
		return fmt.Errorf("starting the no-route helper: %w", err)
	}
	wait := cli.ContainerWait(ctx, created.ID, client.ContainerWaitOptions{Condition: container.WaitConditionNotRunning})
	var status int64
	select {
	case r := <-wait.Result:
		status = r.StatusCode
	case err := <-wait.Error:
		if ctx.Err() != nil {
			return fmt.Errorf("the no-route helper (%s %s) did not finish within %s: is %s agentenv's terminal binary?", terminalMount, dropRoutesArg, helperTimeout, bin)
		}
		return fmt.Errorf("waiting for the no-route helper: %w", err)
	}
	if status != 0 {
		out := containerLogs(context.WithoutCancel(ctx), cli, created.ID)
		return fmt.Errorf("the no-route helper (%s %s) exited %d: %s", bin, dropRoutesArg, status, out)
	}
	return nil
}
