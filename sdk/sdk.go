// Package sdk holds what every agentenv plugin shares: its Info, the
// go-plugin handshake and the protocol versions the host and a plugin
// negotiate. The per-kind interfaces live in sdk/sandbox, sdk/toolformat
// and sdk/reward; each has a Serve function that is the whole main() of a
// plugin binary.
package sdk

import (
	"context"
	"encoding/json"
	"errors"
)

// Kind names one of the three plugin kinds.
type Kind string

const (
	KindSandbox    Kind = "sandbox"
	KindToolFormat Kind = "toolformat"
	KindReward     Kind = "reward"
)

// Kinds lists every plugin kind in a stable order.
var Kinds = []Kind{KindSandbox, KindToolFormat, KindReward}

// Info describes a plugin. Every plugin answers it; the host shows it in
// `agentenv plugins list` and validates configuration against ConfigSchema.
type Info struct {
	Name    string // e.g. "mean"; the binary is agentenv-<kind>-<name>
	Kind    Kind
	Version string // the plugin's own version, free form (semver advised)
	// Protocols the plugin serves; filled in by Serve, not by the author.
	Protocols []int
	// ConfigSchema is a JSON Schema (draft 2020-12) for the plugin's
	// configuration. Empty means the plugin takes no configuration.
	ConfigSchema json.RawMessage
}

// Informer is implemented by every plugin.
type Informer interface {
	Info() Info
}

// Configurer is implemented by plugins that take configuration. The host
// validates the configuration against Info.ConfigSchema before calling
// Configure, so Configure only sees documents the schema accepts.
type Configurer interface {
	Configure(ctx context.Context, config json.RawMessage) error
}

// Cleaner is implemented by plugins that hold something to give back
// when the host stops them: connections, temporary files, resources of
// their own making. Serve calls Cleanup once, after the host's stop and
// before the process exits; an error is logged. The host gives a stopping
// plugin about two seconds to exit before it kills it, so Cleanup should be
// quick. A plugin killed outright (a crash, the host killed) does not get
// it: what must not leak needs a label or a file to be found by later.
type Cleaner interface {
	Cleanup() error
}

// ErrNotFound is returned (wrapped) for an id a plugin does not know; it
// survives the trip from plugin to host.
var ErrNotFound = errors.New("not found")

// ErrUnsupported is returned (wrapped) by optional calls a plugin does not
// implement; it survives the trip from plugin to host.
var ErrUnsupported = errors.New("unsupported")

// ErrCrashed is wrapped by the host's errors for calls whose plugin process
// died under them, or that were made while it was down and being restarted.
// It lives here rather than in the host so that code holding a sandbox
// Driver, a toolformat Parser or a reward Combiner can tell a crash from a
// refusal without knowing whether it holds a plugin proxy or plugin code
// linked in process.
var ErrCrashed = errors.New("plugin process crashed")
