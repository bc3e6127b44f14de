package local

import (
	"context"
	"strings"
	"testing"

	"github.com/agentenv/agentenv/plugins/sandbox-local/dockertest"
	"github.com/agentenv/agentenv/sdk/sandbox"
)

// Which mode an env runs in, with no engine to talk to (a socket that does
// not exist): auto falls back to processes, docker refuses with the reason.
func TestModeWithoutEngine(t *testing.T) {
	noEngine := "unix://" + t.TempDir() + "/no-docker.sock"
	both := sandbox.Spec{Env: "both", Image: "x:1", Command: []string{"./x"}}
	imageOnly := sandbox.Spec{Env: "img", Image: "x:1"}
	commandOnly := sandbox.Spec{Env: "cmd", Command: []string{"./x"}}
	tests := []struct {
		mode    string
		spec    sandbox.Spec
		want    string // the mode, or a piece of the error
		wantErr bool
	}{
		{"auto", both, ModeProcess, false},
		{"auto", commandOnly, ModeProcess, false},
		{"auto", imageOnly, "does not answer", true},
		{"auto", sandbox.Spec{Env: "none"}, "no command to run", true},
		{"docker", both, "start the engine, or set mode to process", true},
		{"docker", commandOnly, "has no image, and mode is docker", true},
		{"process", both, ModeProcess, false},
		{"process", imageOnly, "mode is process", true},
	}
	for _, tc := range tests {
		t.Run(tc.mode+"/"+tc.spec.Env, func(t *testing.T) {
			p := newPlugin(t, t.TempDir(), map[string]any{"mode": tc.mode, "docker_host": noEngine})
			got, err := p.modeFor(context.Background(), tc.spec)
			if tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.spec.Env) {
					t.Fatalf("modeFor = %q, %v; want an error naming the env and saying %q", got, err, tc.want)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("modeFor = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// With the engine answering, auto still runs an env that declares a
// command as a process (the choice depends on env.toml alone), runs an
// env with only an image in Docker, and keeps an env's mode once decided.
func TestModeAutoWithEngine(t *testing.T) {
	dockertest.Client(t)
	p := newPlugin(t, t.TempDir(), map[string]any{"docker_host": ""})
	both := sandbox.Spec{Env: "both", Image: "x:1", Command: []string{"./x"}}
	if got, err := p.envMode(context.Background(), both); err != nil || got != ModeProcess {
		t.Fatalf("auto with an engine, env with a command and an image: %q %v, want process", got, err)
	}
	imageOnly := sandbox.Spec{Env: "img", Image: "x:1"}
	if got, err := p.envMode(context.Background(), imageOnly); err != nil || got != ModeDocker {
		t.Fatalf("auto with an engine, image only: %q %v, want docker", got, err)
	}
	// The engine going away later does not move a decided env.
	p.engine().mu.Lock()
	p.engine().host = "unix:///nonexistent"
	p.engine().mu.Unlock()
	if got, _ := p.envMode(context.Background(), imageOnly); got != ModeDocker {
		t.Fatalf("a decided env changed mode: %q", got)
	}
}

// Each env's mode is logged once, with why and how to pick the other.
func TestModeWhy(t *testing.T) {
	both := sandbox.Spec{Env: "both", Image: "x:1", Command: []string{"./x"}}
	tests := []struct {
		cfg, mode  string
		spec       sandbox.Spec
		why, other string
	}{
		{ModeAuto, ModeProcess, both, "declares a command as a plain process", "mode=docker runs it in a container of x:1"},
		{ModeAuto, ModeProcess, sandbox.Spec{Env: "cmd", Command: []string{"./x"}}, "declares a command", ""},
		{ModeAuto, ModeDocker, sandbox.Spec{Env: "img", Image: "x:1"}, "only an image in a container", "give the env a command"},
		{ModeDocker, ModeDocker, both, "mode docker is set", "mode=auto"},
	}
	for _, tc := range tests {
		why, other := modeWhy(tc.cfg, tc.mode, tc.spec)
		if !strings.Contains(why, tc.why) || !strings.Contains(other, tc.other) || (tc.other == "") != (other == "") {
			t.Errorf("modeWhy(%s, %s, %s) = %q, %q; want %q, %q", tc.cfg, tc.mode, tc.spec.Env, why, other, tc.why, tc.other)
		}
	}
}

// An env that runs agentenv's terminal in its image's container (a Harbor
// task) is never run as a process: process mode, or auto without an
// engine, refuses it naming the sandboxes that can run it; so does a
// process env that must have no internet. Deploy and Prepare both refuse.
func TestProcessModeRefusesTerminalAndNoInternet(t *testing.T) {
	noEngine := "unix://" + t.TempDir() + "/no-docker.sock"
	harbor := sandbox.Spec{Env: "harbor-task", Image: "agentenv-harbor/t:0123456789ab", Port: 18765, Terminal: &sandbox.Terminal{}}
	withCommand := harbor
	withCommand.Command = []string{"./x"}
	offline := sandbox.Spec{Env: "offline", Command: []string{"./x"}, Port: 18765, NoInternet: true}
	tests := []struct {
		name, mode string
		spec       sandbox.Spec
		want       []string
	}{
		{"process", "process", harbor, []string{`env "harbor-task"`, "mode is process", "--sandbox local in Docker mode", "--sandbox k8s"}},
		{"process, with a command", "process", withCommand, []string{"process mode cannot run it", "--sandbox k8s"}},
		{"auto, no engine", "auto", harbor, []string{"does not answer", "--sandbox local in Docker mode", "--sandbox k8s"}},
		{"auto, no engine, with a command", "auto", withCommand, []string{"does not answer", "--sandbox k8s"}},
		{"no internet as a process", "process", offline, []string{`env "offline"`, "no internet access", "process mode cannot enforce", "mode=docker"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := newPlugin(t, t.TempDir(), map[string]any{"mode": tc.mode, "docker_host": noEngine})
			_, deployErr := p.Deploy(context.Background(), tc.spec)
			prepareErr := p.Prepare(context.Background(), tc.spec)
			for what, err := range map[string]error{"Deploy": deployErr, "Prepare": prepareErr} {
				if err == nil {
					t.Fatalf("%s succeeded", what)
				}
				for _, w := range tc.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("%s: error %q does not say %q", what, err, w)
					}
				}
			}
		})
	}
}
