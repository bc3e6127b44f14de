package local

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/agentenv/agentenv/plugins/sandbox-local/dockertest"
	"github.com/agentenv/agentenv/sdk/sdktest"
)

// A process env flooding its output keeps its log under log_max_mb while
// it writes, and the log keeps its end (for error reports).
func TestProcessEnvLogIsCapped(t *testing.T) {
	p := newPlugin(t, t.TempDir(), map[string]any{"log_max_mb": 1})
	spec := testSpec()
	// The flood runs beside the env, into the same output.
	spec.Command = []string{"sh", "-c", sdktest.FloodCommand, testenvBin}
	sb := deploy(t, p, spec)
	path := filepath.Join(os.TempDir(), rootPrefix+sb.ID, envLog)
	sdktest.WaitLogCapped(t, path)
}

// A container's log rotates within log_max_mb (json-file, two files),
// whatever the engine's default driver keeps.
func TestDockerEnvLogIsCapped(t *testing.T) {
	cli := dockertest.Client(t)
	p := newDockerPlugin(t, map[string]any{"log_max_mb": 4})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	spec := dockerSpec(t, cli, "")
	if err := p.Prepare(ctx, spec); err != nil {
		t.Fatal(err)
	}
	sb, err := p.Deploy(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Terminate(context.Background(), sb)
	h, ok := dockerHandleOf(sb)
	if !ok || h.Container == "" {
		t.Fatalf("no container in the handle %s", sb.State)
	}
	ins, err := cli.ContainerInspect(ctx, h.Container, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lc := ins.Container.HostConfig.LogConfig
	if lc.Type != "json-file" || lc.Config["max-size"] != "2048k" || lc.Config["max-file"] != "2" {
		t.Fatalf("log config %+v, want json-file of two 2 MiB files", lc)
	}
}
