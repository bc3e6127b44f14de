package local

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/hashicorp/go-hclog"
	"github.com/moby/moby/api/types/build"
	"github.com/moby/moby/api/types/jsonstream"
	"github.com/moby/moby/client"

	"github.com/agentenv/agentenv/sdk/sandbox"
)

// LabelRoot, set to "writable" on an env's image (a LABEL line in its
// Dockerfile), gives its containers a writable root filesystem: by default
// the root is read-only, with a tmpfs on /tmp.
const LabelRoot = "agentenv.root"

// imageInfo is what a deploy needs to know of an env's image.
type imageInfo struct {
	writableRoot bool
	workdir      string // the image's WORKDIR ("" = none)
}

// image returns what the engine knows of an image, remembered per engine.
func (e *engine) image(ctx context.Context, cli *client.Client, ref string) (imageInfo, error) {
	e.mu.Lock()
	info, ok := e.images[ref]
	e.mu.Unlock()
	if ok {
		return info, nil
	}
	info, found, err := inspectImage(ctx, cli, ref)
	if err != nil {
		return imageInfo{}, err
	}
	if !found {
		return imageInfo{}, fmt.Errorf("image %s: %w", ref, errNoImage)
	}
	e.mu.Lock()
	e.images[ref] = info
	e.mu.Unlock()
	return info, nil
}

func inspectImage(ctx context.Context, cli *client.Client, ref string) (imageInfo, bool, error) {
	ins, err := cli.ImageInspect(ctx, ref)
	if cerrdefs.IsNotFound(err) {
		return imageInfo{}, false, nil
	}
	if err != nil {
		return imageInfo{}, false, fmt.Errorf("inspecting image %s: %w", ref, err)
	}
	var info imageInfo
	if ins.Config != nil {
		info.writableRoot = ins.Config.Labels[LabelRoot] == "writable"
		info.workdir = ins.Config.WorkingDir
	}
	return info, true, nil
}

// prepareDocker makes sure the env's image is on the engine. When the tag
// is missing it runs the env's build command (which may compile what the
// Dockerfile copies) and builds the image from the env's folder, or pulls
// it when the folder has no Dockerfile: at most parallel_builds at once,
// each within the env's build timeout. The build's progress goes to the
// log. A tag that exists is used as it is: change the tag to rebuild (a
// Harbor task's tag is its build context's content hash, so it is reused
// across episodes and restarts until the context changes).
func (p *Plugin) prepareDocker(ctx context.Context, spec sandbox.Spec) error {
	if spec.Terminal != nil || spec.NoInternet {
		// Found now, so a server refuses to start without it rather than
		// failing every deploy.
		if _, err := p.terminalBinary(); err != nil {
			return fmt.Errorf("sandbox-local: env %q: %w", spec.Env, err)
		}
	}
	eng := p.engine()
	cli, err := eng.client(ctx)
	if err != nil {
		return fmt.Errorf("sandbox-local: env %q: %w", spec.Env, err)
	}
	if _, found, err := inspectImage(ctx, cli, spec.Image); err != nil || found {
		if found {
			p.log.Info("image present", "env", spec.Env, "image", spec.Image)
		}
		return err
	}
	// One build per tag: envs that share a build context (a Harbor
	// dataset's tasks often do) wait for the first one's build.
	releaseTag, err := eng.tagTurn(ctx, spec.Image)
	if err != nil {
		return fmt.Errorf("sandbox-local: env %q: image %s: waiting for another env's build of it: %w", spec.Env, spec.Image, err)
	}
	defer releaseTag()
	release, err := eng.buildTurn(ctx, p.log, spec)
	if err != nil {
		return fmt.Errorf("sandbox-local: env %q: image %s: %w", spec.Env, spec.Image, err)
	}
	defer release()
	// Another env with the same tag may have built it while this one waited.
	if _, found, err := inspectImage(ctx, cli, spec.Image); err != nil || found {
		if found {
			p.log.Info("image present", "env", spec.Env, "image", spec.Image, "built_by", "another env, while this one waited")
		}
		return err
	}
	timeout := p.buildTimeout(spec)
	bctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	dockerfile := filepath.Join(spec.Dir, "Dockerfile")
	if _, statErr := os.Stat(dockerfile); spec.Dir != "" && statErr == nil {
		if err := p.runBuild(ctx, spec); err != nil {
			return err
		}
		p.log.Info("building image", "env", spec.Env, "image", spec.Image, "context", spec.Dir, "timeout", timeout.String())
		err = p.buildImage(bctx, cli, spec)
	} else {
		p.log.Info("pulling image (the env's folder has no Dockerfile)", "env", spec.Env, "image", spec.Image, "timeout", timeout.String())
		err = p.pullImage(bctx, cli, spec)
	}
	if err != nil {
		if bctx.Err() != nil && ctx.Err() == nil {
			err = fmt.Errorf("%w (the build ran past its timeout of %s: raise the env's build timeout, e.g. a Harbor task's build_timeout_sec, or the build_timeout setting): %w", err, timeout, bctx.Err())
		}
		p.log.Error("image build failed", "env", spec.Env, "image", spec.Image, "took", time.Since(start).String(), "error", err)
		return fmt.Errorf("sandbox-local: env %q: image %s: %w", spec.Env, spec.Image, err)
	}
	p.log.Info("image ready", "env", spec.Env, "image", spec.Image, "took", time.Since(start).String())
	return nil
}

// tagTurn waits until no other env builds tag; release it when done.
func (e *engine) tagTurn(ctx context.Context, tag string) (release func(), _ error) {
	v, _ := e.tagBuilds.LoadOrStore(tag, make(chan struct{}, 1))
	turn := v.(chan struct{})
	select {
	case turn <- struct{}{}:
		return func() { <-turn }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// buildTurn waits for one of the parallel_builds turns to build an image,
// saying so in the log when it has to wait; release it when done.
func (e *engine) buildTurn(ctx context.Context, log hclog.Logger, spec sandbox.Spec) (release func(), _ error) {
	select {
	case e.builds <- struct{}{}:
		return func() { <-e.builds }, nil
	default:
	}
	log.Info("waiting for a build turn", "env", spec.Env, "image", spec.Image, "parallel_builds", cap(e.builds))
	select {
	case e.builds <- struct{}{}:
		return func() { <-e.builds }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for a build turn (%d builds run at once: parallel_builds): %w", cap(e.builds), ctx.Err())
	}
}

// buildImage builds spec.Image from the env's folder (the whole folder is
// the build context) with the engine's classic builder, which every engine
// has (BuildKit needs a session the API alone does not give).
func (p *Plugin) buildImage(ctx context.Context, cli *client.Client, spec sandbox.Spec) error {
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(tarDir(pw, spec.Dir)) }()
	defer pr.Close()
	res, err := cli.ImageBuild(ctx, pr, client.ImageBuildOptions{
		Tags: []string{spec.Image}, Dockerfile: "Dockerfile", Remove: true, ForceRemove: true,
		Version: build.BuilderV1, Labels: map[string]string{"agentenv.env": spec.Env},
	})
	if err != nil {
		return fmt.Errorf("building from %s: %w", spec.Dir, err)
	}
	defer res.Body.Close()
	return p.followProgress(res.Body, spec, "build")
}

// pullImage pulls spec.Image from its registry.
func (p *Plugin) pullImage(ctx context.Context, cli *client.Client, spec sandbox.Spec) error {
	res, err := cli.ImagePull(ctx, spec.Image, client.ImagePullOptions{})
	if err != nil {
		return fmt.Errorf("pulling (the env's folder %s has no Dockerfile to build it from): %w", spec.Dir, err)
	}
	defer res.Close()
	return p.followProgress(res, spec, "pull")
}

// followProgress logs an engine's build or pull stream line by line and
// returns the error it ends with, if any. Progress bars are left out.
func (p *Plugin) followProgress(r io.Reader, spec sandbox.Spec, what string) error {
	dec := json.NewDecoder(r)
	var tail []string
	for {
		var m jsonstream.Message
		if err := dec.Decode(&m); err == io.EOF {
			return nil
		} else if err != nil {
			return fmt.Errorf("reading the engine's %s output: %w", what, err)
		}
		if m.Error != nil {
			msg := m.Error.Message
			if len(tail) > 0 {
				msg += "; the " + what + " output ends:\n" + strings.Join(tail, "\n")
			}
			return errors.New(msg)
		}
		line := strings.TrimSpace(m.Stream)
		if line == "" && m.Status != "" && m.Progress == nil {
			line = strings.TrimSpace(m.ID + " " + m.Status)
		}
		if line == "" {
			continue
		}
		p.log.Info("image "+what, "env", spec.Env, "image", spec.Image, "output", line)
		tail = append(tail, line)
		if len(tail) > 20 {
			tail = tail[1:]
		}
	}
}

// tarDir writes dir as a tar stream: the build context.
func tarDir(w io.Writer, dir string) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil || rel == "." {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if info.Mode()&(fs.ModeSocket|fs.ModeNamedPipe|fs.ModeDevice|fs.ModeCharDevice|fs.ModeIrregular) != 0 {
			return nil // nothing a build can use
		}
		link := ""
		if info.Mode()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(path); err != nil {
				return err
			}
		}
		hdr, err := tar.FileInfoHeader(info, link)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		hdr.Name = filepath.ToSlash(rel)
		if d.IsDir() {
			hdr.Name += "/"
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, f)
		return err
	})
	if err != nil {
		return fmt.Errorf("the build context %s: %w", dir, err)
	}
	return tw.Close()
}
