package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/moby/moby/client"

	"github.com/agentenv/agentenv/sdk/sandbox"
)

// errNoImage is wrapped by engine.image when the engine lacks the image.
var errNoImage = errors.New("no such image on the engine")

// imageFor is what a deploy needs of its env's image. An image gone from
// the engine (removed while serving: `docker image rm`, a prune) is built
// again from the env's folder rather than failing every deploy until a
// restart.
func (p *Plugin) imageFor(ctx context.Context, cli *client.Client, spec sandbox.Spec) (imageInfo, error) {
	info, err := p.engine().image(ctx, cli, spec.Image)
	if !errors.Is(err, errNoImage) {
		return info, err
	}
	return p.imageAgain(ctx, cli, spec)
}

// imageAgain builds an env's image that is gone from the engine: once,
// however many deploys find it gone at the same time; the others wait for
// that build (each within its own deadline). The build is not cut short
// by the deploy that started it: build_timeout bounds it.
func (p *Plugin) imageAgain(ctx context.Context, cli *client.Client, spec sandbox.Spec) (imageInfo, error) {
	eng := p.engine()
	eng.forgetImage(spec.Image)
	if _, err := os.Stat(filepath.Join(spec.Dir, "Dockerfile")); spec.Dir == "" || err != nil {
		return imageInfo{}, fmt.Errorf("image %s is not on the engine (removed while serving?) and the env's folder has no Dockerfile to build it from: pull it again (docker pull %s) and retry, or restart agentenv serve, which prepares every env", spec.Image, spec.Image)
	}
	ch := eng.rebuilds.DoChan(spec.Image, func() (any, error) {
		p.log.Warn("the env's image is gone from the engine; building it again from the env's folder", "env", spec.Env, "image", spec.Image)
		return nil, p.prepareDocker(context.WithoutCancel(ctx), spec)
	})
	select {
	case r := <-ch:
		if r.Err != nil {
			return imageInfo{}, fmt.Errorf("image %s is not on the engine (removed while serving?) and building it again failed: %w; fix the build, then retry or restart agentenv serve", spec.Image, r.Err)
		}
	case <-ctx.Done():
		return imageInfo{}, fmt.Errorf("waiting for image %s to be built again (it was gone from the engine): %w", spec.Image, ctx.Err())
	}
	return eng.image(ctx, cli, spec.Image)
}

// forgetImage drops what the engine was known to hold of ref.
func (e *engine) forgetImage(ref string) {
	e.mu.Lock()
	delete(e.images, ref)
	e.mu.Unlock()
}
