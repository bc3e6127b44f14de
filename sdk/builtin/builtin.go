// Package builtin is the registry of the plugins compiled into an agentenv
// binary, and the list of every first-party plugin, linked or not.
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
	"strings"
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
// name, an invalid kind or name, a nil Serve, or a first-party plugin
// registered under one of its aliases is a programming error: Register
// panics, naming both registrations, so the binary never starts with two
// plugins behind one name.
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
	for _, f := range firstParty {
		if f.Kind == p.Kind && slices.Contains(f.Aliases, p.Name) {
			return fmt.Errorf("plugin %s: %q is an alias of %s; register the canonical name %q", p.ID(), p.Name, f.ID(), f.Name)
		}
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

// FirstParty is a plugin agentenv's own repository provides, whether or not
// this binary links it.
type FirstParty struct {
	Kind sdk.Kind
	Name string // canonical
	// Aliases are other spellings users may write for Name; the plugin host
	// resolves them to Name (and only the host does).
	Aliases []string
	// Tag is the build tag that leaves the plugin out of agentenv.
	Tag string
	// Package is the plugin's Go package, the one cmd/agentenv blank-imports.
	Package string
}

// ID is the plugin's full name, <kind>-<name>.
func (f FirstParty) ID() string { return string(f.Kind) + "-" + f.Name }

// Command is the package of the plugin's standalone binary,
// <Package>/cmd/agentenv-<kind>-<name>.
func (f FirstParty) Command() string { return f.Package + "/cmd/agentenv-" + f.ID() }

// SourceDir is Command as a path inside agentenv's source tree.
func (f FirstParty) SourceDir() string {
	return "./" + strings.TrimPrefix(f.Command(), modulePrefix)
}

// CanonicalName is the one resolution of plugin names: the canonical name
// of the kind's first-party plugin that name is an alias of (qwen3coder and
// qwen3-coder are toolformat qwen3_coder), or name itself.
func CanonicalName(kind sdk.Kind, name string) string {
	for _, f := range firstParty {
		if f.Kind == kind && slices.Contains(f.Aliases, name) {
			return f.Name
		}
	}
	return name
}

// FirstParties lists every first-party plugin, sorted by kind and name.
func FirstParties() []FirstParty {
	out := make([]FirstParty, len(firstParty))
	for i, f := range firstParty {
		f.Aliases = slices.Clone(f.Aliases)
		out[i] = f
	}
	return out
}
