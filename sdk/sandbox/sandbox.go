// Package sandbox is the plugin-author API for sandboxes, and this comment
// is the whole contract a sandbox must meet (protocol 2).
//
// A sandbox runs an episode's env somewhere the host can reach it over HTTP
// and tears it down again. The host calls, in order:
//
//   - Prepare(spec), optional (implement Preparer): build what an env needs
//     once, e.g. run its build command or build its image. The SDK runs it at
//     most once per env per plugin process, before that env's first Deploy,
//     however many calls arrive at once; a failed Prepare is not retried
//     unless its context was cut short. The host also calls it at start-up so
//     the first episodes do not wait.
//   - Deploy(spec): start the env and return once it has started and its
//     endpoint is known. Deploy should fail fast, with the env's own output,
//     when the env exits before it listens. Deploy must not speak MCP: the
//     host connects to Endpoint+"/mcp" itself, retrying within the deploy
//     deadline, once, in one place. On failure nothing Deploy created may be
//     left behind; a Deploy cut short by its deadline may leave something,
//     which the host finds by the LabelDeploy label through List.
//   - Terminate(handle) and Exec(handle, cmd): the host keeps the Sandbox
//     Deploy returned (the handle) and passes it back. A new plugin process
//     must be able to act on a handle an earlier process returned (the first
//     one may have crashed): put whatever that takes in Sandbox.State.
//     Terminate is idempotent in effect: a sandbox already gone is
//     ErrNotFound, which the host treats as done.
//   - List(labels): the live sandboxes carrying all of labels, as handles,
//     for reaping what a killed host left behind.
//
// A handle holds no secret: never put the env's variables (Spec.EnvVars may
// hold credentials) in Sandbox.State or Labels; the host may log handles and
// passes them between processes.
//
// Ports: Spec.Port is the port the env listens on inside its sandbox. A
// sandbox that gives each env its own network namespace (a container, a
// Fargate task) runs the env on Spec.Port and publishes it. A sandbox whose
// envs share the host's ports cannot give every env the same port: it
// assigns a free one. Either way the env gets the port it must listen on as
// EnvPort (AGENTENV_PORT), so an env listens on $AGENTENV_PORT when it is
// set and on its declared port otherwise.
package sandbox

import (
	"context"
	"fmt"
	"time"

	"github.com/agentenv/agentenv/sdk"
)

// Label keys the host puts in Spec.Labels. Every object a sandbox creates
// carries all of Spec.Labels, and List filters on them.
const (
	// LabelServer identifies the agentenv server instance (bundle and
	// address); reaping lists by it.
	LabelServer = "agentenv.server"
	// LabelEpisode is the episode's id.
	LabelEpisode = "agentenv.episode"
	// LabelTask is the task's id.
	LabelTask = "agentenv.task"
	// LabelDeploy is a nonce unique to one Deploy call, so the host can find
	// what a Deploy that failed or timed out left behind.
	LabelDeploy = "agentenv.deploy"
	// LabelCreated is when the host asked for the deploy (RFC 3339, UTC):
	// `agentenv sandboxes list` shows a sandbox's age from it.
	LabelCreated = "agentenv.created"
)

// Variables every sandbox sets in the env's environment, besides
// Spec.EnvVars (which they win over).
const (
	// EnvPort is the port the env must listen on.
	EnvPort = "AGENTENV_PORT"
	// EnvSandboxID is the sandbox's id (Sandbox.ID).
	EnvSandboxID = "AGENTENV_SANDBOX_ID"
)

// Spec says what to deploy: one env of a bundle, as its env.toml declares it.
type Spec struct {
	Env     string   // the env's name in its bundle
	Dir     string   // absolute path of the env's folder (build context, working dir)
	Image   string   // container image, for sandboxes that run images
	Command []string // command line, for sandboxes that run processes
	// Build is the env's build command (run in Dir by Prepare, for
	// sandboxes that run processes); empty when there is none.
	Build []string
	// Port is the port the env listens on inside its sandbox (see the
	// package comment for how sandboxes that share the host's ports differ).
	Port    int
	EnvVars map[string]string // may hold secrets: never put them in a handle
	CPU     float64           // cores; 0 = the sandbox's default
	// MemoryMB is the memory limit; 0 = the sandbox's default.
	MemoryMB int
	// Labels go on every object the sandbox creates; List filters on them.
	// The host always sets LabelEpisode, LabelTask, LabelDeploy and
	// LabelCreated, and LabelServer when it serves.
	Labels map[string]string

	// Terminal, when set, asks the sandbox to run agentenv's terminal server
	// as the env, injected into the container from outside (a read-only bind
	// mount, an init container), so Image needs no change and its own
	// entrypoint is not run: the server listens on Port and runs the model's
	// commands in the container (docs/harbor.md). A sandbox that cannot inject
	// it must refuse the Deploy with an error naming the sandboxes that can.
	Terminal *Terminal
	// StorageMB caps the env's writable disk where the sandbox can; 0 = the
	// sandbox's default.
	StorageMB int
	// NoInternet: the env may reach nothing outside its sandbox (no route
	// out); the host still reaches its endpoint.
	NoInternet bool
	// BuildTimeout bounds building the env's image (Prepare); 0 = the
	// sandbox's default.
	BuildTimeout time.Duration
}

// Terminal is how to run agentenv's injected terminal server.
type Terminal struct {
	// Workdir is where the model's commands run ("" = the image's WORKDIR,
	// or / without one).
	Workdir string
}

// Sandbox is the handle of a deployed env. The host keeps it and passes it
// back to Terminate and Exec.
type Sandbox struct {
	ID string
	// Endpoint is the base URL of the env's server, e.g. http://127.0.0.1:41234;
	// its MCP endpoint is Endpoint + "/mcp".
	Endpoint string
	Labels   map[string]string
	// State is opaque to the host: whatever a later plugin process needs to
	// find and act on the sandbox. No secrets.
	State []byte
}

// ExecResult is the outcome of a command run in a sandbox.
type ExecResult struct {
	ExitCode int
	Stdout   string
	Stderr   string
}

// ErrNotFound is returned (wrapped) by Terminate and Exec for a sandbox
// that is gone or was never known. It is sdk.ErrNotFound, so it survives
// the wire.
var ErrNotFound = sdk.ErrNotFound

// ErrExecUnsupported is returned (wrapped) by Exec from sandboxes that
// cannot run commands. It is sdk.ErrUnsupported, so it survives the wire.
var ErrExecUnsupported = sdk.ErrUnsupported

// Deployer deploys an env (see the package comment for when it returns).
type Deployer interface {
	Deploy(ctx context.Context, spec Spec) (Sandbox, error)
}

// Terminator tears a sandbox down, given the handle Deploy or List returned.
type Terminator interface {
	Terminate(ctx context.Context, sb Sandbox) error
}

// Lister lists live sandboxes whose labels include all of labels.
type Lister interface {
	List(ctx context.Context, labels map[string]string) ([]Sandbox, error)
}

// Execer runs a command in a sandbox, for command verifiers.
type Execer interface {
	Exec(ctx context.Context, sb Sandbox, cmd []string) (ExecResult, error)
}

// Preparer is optional: a sandbox that builds something per env before
// deploying it (a binary, an image) implements it.
type Preparer interface {
	Prepare(ctx context.Context, spec Spec) error
}

// Explainer is optional: a sandbox that can tell why an env stopped
// answering (its pod evicted, its node drained or down, its container
// killed for memory) implements it. The host asks when a call to a live
// env fails and adds the answer to the episode's error, which the trainer
// is sent: one sentence naming what the sandbox saw, with no secrets or
// server paths; "" when the sandbox knows nothing more. The host bounds
// the call to a few seconds.
type Explainer interface {
	Explain(ctx context.Context, sb Sandbox) (string, error)
}

// Driver is a whole sandbox.
type Driver interface {
	Deployer
	Terminator
	Lister
	Execer
}

// Plugin is what a sandbox plugin binary serves.
type Plugin interface {
	sdk.Informer
	Driver
}

// ExecUnsupported is embedded by sandboxes that cannot run commands: its
// Exec says so, and the host scores such tasks' command verifiers as
// failed with that reason.
type ExecUnsupported struct{}

// Exec returns ErrExecUnsupported.
func (ExecUnsupported) Exec(_ context.Context, sb Sandbox, _ []string) (ExecResult, error) {
	return ExecResult{}, fmt.Errorf("sandbox %s cannot run commands: %w", sb.ID, ErrExecUnsupported)
}
