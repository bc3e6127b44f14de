package ecs

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentenv/agentenv/sdk/sdktest/wait"

	"github.com/agentenv/agentenv/plugins/sandbox-ecs/standin"
	"github.com/agentenv/agentenv/plugins/sandbox-ecs/standin/standintest"
	"github.com/agentenv/agentenv/sdk/sandbox"
	"github.com/agentenv/agentenv/sdk/sdktest"
)

// The sandbox conformance suite, with each task's image run on Docker by
// the stand-in, and the handle terminated through a second plugin instance.
func TestConformanceOnDocker(t *testing.T) {
	d := standintest.Docker(t)
	image := buildListener(t, d)
	s := standintest.Start(t, d, standin.Options{StopGrace: time.Second})
	p := newPlugin(t, s.URL, nil)
	sdktest.SandboxConformance(t, p, sdktest.SandboxCase{
		Spec:    spec(image, labels("conformance", "ep1")),
		Restart: func() sandbox.Plugin { return newPlugin(t, s.URL, nil) },
	})
}

// The endpoint reaches the env in its container, which got its variables
// through RunTask's overrides; an env that exits at start and an image the
// engine lacks are deploy errors with ECS's reasons.
func TestDockerTasks(t *testing.T) {
	d := standintest.Docker(t)
	image := buildListener(t, d)
	// A task stays PENDING a second after its container starts, so one
	// that exits at once is seen to stop before RUNNING (ECS, like this,
	// may also report RUNNING first when the exit comes later).
	s := standintest.Start(t, d, standin.Options{StopGrace: time.Second, Pending: time.Second})
	p := newPlugin(t, s.URL, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	sb, err := p.Deploy(ctx, spec(image, labels("docker", "ep1")))
	if err != nil {
		t.Fatal(err)
	}
	var body string
	wait.For(t, sb.Endpoint+" to answer", func() error {
		resp, err := http.Get(sb.Endpoint)
		if err != nil {
			return err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if body = strings.TrimSpace(string(b)); body == "" {
			return fmt.Errorf("an empty answer (%s)", resp.Status)
		}
		return nil
	})
	if body != sb.ID {
		t.Errorf("the env says it is sandbox %q, the handle %q", body, sb.ID)
	}
	if err := p.Terminate(ctx, sb); err != nil {
		t.Fatal(err)
	}

	exits := spec(image, labels("docker", "ep2"))
	exits.EnvVars = map[string]string{"LISTENER_EXIT": "3"}
	_, err = p.Deploy(ctx, exits)
	for _, want := range []string{"stopped before RUNNING", "Essential container in task exited", "stop code EssentialContainerExited", "container env: exit code 3"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("deploy of an env that exits: %v, want %q", err, want)
		}
	}
	other := newPlugin(t, s.URL, map[string]any{"envs": map[string]any{"listener": map[string]any{"image": "agentenv-ecs-no-such-image:1"}}})
	_, err = other.Deploy(ctx, spec(image, labels("docker", "ep3")))
	for _, want := range []string{"stopped before RUNNING", "CannotPullContainerError", "agentenv-ecs-no-such-image:1", "TaskFailedToStart"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("deploy of a missing image: %v, want %q", err, want)
		}
	}
}
