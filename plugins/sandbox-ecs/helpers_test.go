package ecs

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/agentenv/agentenv/internal/servetest"
	"github.com/agentenv/agentenv/plugins/sandbox-ecs/standin"
	"github.com/agentenv/agentenv/plugins/sandbox-ecs/standin/standintest"
	"github.com/agentenv/agentenv/sdk/sandbox"
)

// listenerPort is the port the test env listens on in its task.
const listenerPort = 18080

// testConfig is a configuration reaching the stand-in at url, merged with
// extra settings.
func testConfig(t testing.TB, url string, extra map[string]any) json.RawMessage {
	t.Helper()
	cfg := map[string]any{
		"region": "us-east-1", "cluster": "default", "subnets": []string{"subnet-0standin"},
		"security_groups": []string{"sg-0standin"}, "endpoint_url": url, "stop_wait": "10s",
	}
	for k, v := range extra {
		cfg[k] = v
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// newPlugin is the plugin configured against the stand-in at url.
func newPlugin(t testing.TB, url string, extra map[string]any) *Plugin {
	t.Helper()
	standintest.Credentials(t)
	p := New()
	p.SetLogger(hclog.NewNullLogger())
	if err := p.Configure(context.Background(), testConfig(t, url, extra)); err != nil {
		t.Fatalf("Configure: %v", err)
	}
	return p
}

// spec is a deploy of the image-only test env.
func spec(image string, labels map[string]string) sandbox.Spec {
	return sandbox.Spec{Env: "listener", Image: image, Port: listenerPort, CPU: 0.25, MemoryMB: 64, Labels: labels}
}

var (
	listenerOnce  sync.Once
	listenerImage string
	listenerErr   string
)

// buildListener builds testdata/listener into a FROM-scratch image once per
// test binary and returns its tag.
func buildListener(t *testing.T, d *standin.Docker) string {
	t.Helper()
	listenerOnce.Do(func() {
		dir := t.TempDir()
		err := servetest.BuildStatic("testdata/listener", ".", filepath.Join(dir, "bin", "listener"))
		var df []byte
		if err == nil {
			df, err = os.ReadFile("testdata/listener/Dockerfile")
		}
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, "Dockerfile"), df, 0o644)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if err == nil {
			err = d.BuildImage(ctx, dir, "agentenv-ecs-test-listener:1", "bin/listener")
		}
		if err != nil {
			listenerErr = err.Error()
			return
		}
		listenerImage = "agentenv-ecs-test-listener:1"
	})
	if listenerImage == "" {
		t.Fatalf("building the listener image: %s", listenerErr)
	}
	return listenerImage
}
