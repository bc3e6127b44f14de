// Package sandbox is the plugin-author API for sandboxes: they deploy an
// episode's env somewhere the host can reach it, and tear it down.
package sandbox

import (
	"context"

	"github.com/agentenv/agentenv/sdk"
)

// Spec says what to deploy.
type Spec struct {
	Env     string   // the env's name in its bundle
	Dir     string   // absolute path of the env's folder (build context, working dir)
	Image   string   // container image, for sandboxes that run images
	Command []string // command line, for sandboxes that run processes
	Port    int      // port the env listens on (a process gets it as AGENTENV_PORT)
	EnvVars map[string]string
	CPU     float64 // cores; 0 = the sandbox's default
	// MemoryMB is the memory limit; 0 = the sandbox's default.
	MemoryMB int
	// Labels go on every object the sandbox creates; List filters on them.
	// The host always sets agentenv.instance and agentenv.episode.
	Labels map[string]string
}

// Sandbox is a deployed env.
type Sandbox struct {
	ID string
	// Endpoint is the base URL of the env's server, e.g. http://127.0.0.1:41234;
	// its MCP endpoint is Endpoint + "/mcp".
	Endpoint string
	Labels   map[string]string
	// State is opaque to the host; the plugin may use it to find the sandbox
	// again after a restart.
	State []byte
}

// ExecResult is the outcome of a command run in a sandbox.
type ExecResult struct {
	ExitCode int
	Stdout   string
	Stderr   string
}

// ErrNotFound is returned (wrapped) by Terminate and Exec for an id the
// sandbox does not know. It is sdk.ErrNotFound, so it survives the wire.
var ErrNotFound = sdk.ErrNotFound

// ErrExecUnsupported is returned (wrapped) by Exec from sandboxes that
// cannot run commands. It is sdk.ErrUnsupported, so it survives the wire.
var ErrExecUnsupported = sdk.ErrUnsupported

// Deployer deploys an env. Deploy returns once the env's port accepts
// connections or fails; on failure nothing it created is left behind.
type Deployer interface {
	Deploy(ctx context.Context, spec Spec) (Sandbox, error)
}

// Terminator tears a sandbox down. A handle must survive a plugin restart:
// a new plugin process can terminate what an old one deployed.
type Terminator interface {
	Terminate(ctx context.Context, id string) error
}

// Lister lists live sandboxes whose labels include all of labels; the host
// uses it to reap sandboxes a killed instance left behind.
type Lister interface {
	List(ctx context.Context, labels map[string]string) ([]Sandbox, error)
}

// Execer runs a command in a sandbox, for command verifiers.
type Execer interface {
	Exec(ctx context.Context, id string, cmd []string) (ExecResult, error)
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
