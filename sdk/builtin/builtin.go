// Package builtin is the registry of the plugins compiled into an agentenv
// binary. (The list of every first-party plugin, linked or not, is the
// host's: core/firstparty.)
//
// A first-party plugin package declares itself once, in an init function
// of its own package:
//
//	func init() {
//		builtin.Register(builtin.Plugin{Kind: sdk.KindReward, Name: Name,
//			Serve: func() { reward.Serve(New()) }})
//	}
//
// and cmd/agentenv links it with one blank import in a build-tagged file
// (cmd/agentenv/builtins_mean.go, `//go:build !no_mean`), so
// `go build -tags no_mean` leaves it out. Everything that lists or runs
// built-in plugins (`plugins list`, `plugins inspect`, `plugin-serve`, the
// plugin host's default built-ins) reads Plugins. The model is
// containerd's plugin registry and its cmd/containerd/builtins files.
package builtin

import (
	"fmt"
	"runtime"
	"slices"
	"sort"
	"sync"

	"github.com/agentenv/agentenv/sdk"
)

// Plugin is one plugin a binary serves itself.
type Plugin struct {
	Kind sdk.Kind
	// Name is the plugin's canonical name, as users write it (qwen3_coder),
	// and as its Info says.
	Name string
	// Serve is the whole main of the plugin as a binary of its own: it
	// serves the plugin over go-plugin (reward.Serve(New()), ...) and does
	// not return. agentenv runs it as `agentenv plugin-serve <kind>-<name>`.
	Serve func()
	// New, when set, makes the plugin for a host to run in its own
	// process instead of in a plugin-serve subprocess: the host does so
	// for tool formats (pure functions of a reply), unless told to
	// isolate them. nil = always a subprocess. A plugin made by New
	// shares the host's process: it must be safe for concurrent calls
	// and should not log through sdk.Logger (whose JSON lines are meant
	// for a host reading a plugin's stderr).
	New func() sdk.Informer
}

// ID is the plugin's full name, <kind>-<name>.
func (p Plugin) ID() string { return string(p.Kind) + "-" + p.Name }

type registered struct {
	Plugin
	at string // file:line of the Register call, for the duplicate panic
}

var (
	mu      sync.Mutex
	plugins = map[string]registered{}
)

// Register adds p to the plugins this binary serves. Call it from an init
// function of the plugin's package. A second plugin of the same kind and
// name, an invalid kind or name, or a nil Serve is a programming error:
// Register panics, naming both registrations, so the binary never starts
// with two plugins behind one name. (A plugin registered under another
// name of a first-party one, toolformat qwen3coder, is refused by the
// plugin host when it starts.)
func Register(p Plugin) {
	_, file, line, _ := runtime.Caller(1)
	at := fmt.Sprintf("%s:%d", file, line)
	if err := check(p); err != nil {
		panic(fmt.Sprintf("builtin.Register at %s: %v", at, err))
	}
	mu.Lock()
	defer mu.Unlock()
	if prev, ok := plugins[p.ID()]; ok {
		panic(fmt.Sprintf("builtin.Register: plugin %s registered twice: at %s and at %s; a binary links one plugin per kind and name",
			p.ID(), prev.at, at))
	}
	plugins[p.ID()] = registered{Plugin: p, at: at}
}

func check(p Plugin) error {
	if !slices.Contains(sdk.Kinds, p.Kind) {
		return fmt.Errorf("plugin %q: kind %q is not one of %v", p.Name, p.Kind, sdk.Kinds)
	}
	if !sdk.ValidName(p.Name) {
		return fmt.Errorf("plugin %s: name %q is not a plugin name (lower-case letters, digits, '-', '_', '.')", p.ID(), p.Name)
	}
	if p.Serve == nil {
		return fmt.Errorf("plugin %s: Serve is nil", p.ID())
	}
	return nil
}

// Plugins lists the registered plugins, sorted by kind and name.
func Plugins() []Plugin {
	mu.Lock()
	defer mu.Unlock()
	out := make([]Plugin, 0, len(plugins))
	for _, r := range plugins {
		out = append(out, r.Plugin)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Kind != out[j].Kind {
			return out[i].Kind < out[j].Kind
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// IDs lists the registered plugins' ids (<kind>-<name>), sorted.
func IDs() []string {
	ps := Plugins()
	ids := make([]string, len(ps))
	for i, p := range ps {
		ids[i] = p.ID()
	}
	return ids
}

// Lookup finds the registered plugin with id <kind>-<name>.
func Lookup(id string) (Plugin, bool) {
	mu.Lock()
	defer mu.Unlock()
	r, ok := plugins[id]
	return r.Plugin, ok
}
