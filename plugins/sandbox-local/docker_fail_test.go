package local

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentenv/agentenv/sdk/sdktest/wait"

	"github.com/hashicorp/go-hclog"
	"github.com/moby/moby/client"

	"github.com/agentenv/agentenv/plugins/sandbox-local/dockertest"
)

// Twelve deploys at once of an env that exits at start all fail at once
// with its exit status and last output, none by running out its deadline
// (the port proxy, slow under the load, held the probes' connections,
// and an exited container looked deployed).
func TestDockerExitedEnvsFailTheirDeploysAtOnce(t *testing.T) {
	cli := dockertest.Client(t)
	p := newDockerPlugin(t, map[string]any{"grace": "200ms"})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	spec := dockerSpec(t, cli, "")
	if err := p.Prepare(ctx, spec); err != nil {
		t.Fatal(err)
	}
	spec.EnvVars = map[string]string{"DOCKERENV_FAIL": "1"}
	const n = 12
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			defer cancel()
			sb, err := p.Deploy(dctx, spec)
			if err == nil {
				_ = p.Terminate(context.Background(), sb)
				err = errors.New("deployed")
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "exited (status 2)") ||
			!strings.Contains(err.Error(), "failing to start as asked") {
			t.Errorf("deploy %d: %v, want the exit status and output", i, err)
		}
	}
	wait.Until(t, "the failed deploys' objects to go", func() bool { return len(dockerLeft(cli)) == 0 })
}

// An env's image removed while the plugin serves is built again from the
// env's folder at the next deploys: once, the others waiting for it.
func TestDockerImageRemovedWhileServingIsRebuilt(t *testing.T) {
	cli := dockertest.Client(t)
	p := newDockerPlugin(t, nil)
	var logBuf lockedLog
	p.SetLogger(hclog.New(&hclog.LoggerOptions{Output: &logBuf, Level: hclog.Info}))
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	spec := dockerSpec(t, cli, "")
	if err := p.Prepare(ctx, spec); err != nil {
		t.Fatal(err)
	}
	sb, err := p.Deploy(ctx, spec) // the image is looked up, and remembered
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Terminate(ctx, sb); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.ImageRemove(ctx, spec.Image, client.ImageRemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	logBuf.Reset()
	const n = 4
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sb, err := p.Deploy(ctx, spec)
			if err == nil {
				err = p.Terminate(ctx, sb)
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("deploys after the image was removed: %v", err)
	}
	if got := strings.Count(logBuf.String(), "building image"); got != 1 {
		t.Errorf("the image was built %d times, want once:\n%s", got, logBuf.String())
	}
	if left := dockerLeft(cli); len(left) > 0 {
		t.Errorf("left %v", left)
	}
}
