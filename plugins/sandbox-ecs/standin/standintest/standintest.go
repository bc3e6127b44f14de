// Package standintest starts the ECS stand-in for tests: with or without
// Docker, with AWS credentials that reach only it, and a cleanup that
// fails the test if a task or container is left.
package standintest

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentenv/agentenv/plugins/sandbox-ecs/standin"

	"github.com/agentenv/agentenv/sdk/sdktest"
)

// Docker connects to the local Docker engine for a test. Without one the
// test is skipped, except under CI=true, where it fails: CI installs and
// starts dockerd (.ci/run).
func Docker(t testing.TB) *standin.Docker {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d, err := standin.NewDocker(ctx)
	if err != nil {
		sdktest.Missing(t, "a Docker engine (it runs ECS tasks' images)", err.Error(),
			"apt-get install docker.io, then dockerd --storage-driver vfs --iptables=false --bridge=none (as .ci/run does)")
	}
	return d
}

// Server is a running stand-in.
type Server struct {
	*standin.Server
	URL    string
	Docker *standin.Docker // nil in no-Docker mode
}

// Start serves a stand-in on loopback until the test ends; opts.Runner is
// set to d when d is not nil. The cleanup closes it and fails the test if
// any task was still live or any container left.
func Start(t testing.TB, d *standin.Docker, opts standin.Options) *Server {
	t.Helper()
	if d != nil {
		opts.Runner = d
	}
	s := standin.New(opts)
	hs := httptest.NewServer(s)
	t.Cleanup(func() {
		live := s.Live()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var left []string
		if d != nil {
			left, _ = d.Containers(ctx)
		}
		hs.Close()
		if err := s.Close(ctx); err != nil {
			t.Errorf("closing the stand-in: %v", err)
		}
		if len(live) > 0 {
			t.Errorf("tasks still live in the stand-in at the end of the test: %+v", live)
		}
		if len(left) > 0 {
			t.Errorf("containers left on the Docker engine at the end of the test: %v", left)
		}
	})
	return &Server{Server: s, URL: hs.URL, Docker: d}
}

// Credentials points the AWS SDK's default chain at fake credentials and
// away from the machine's profile and instance metadata, for the rest of
// the test (and for the processes it starts).
func Credentials(t testing.TB) {
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDSTANDIN")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "standin-secret-key")
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
}
