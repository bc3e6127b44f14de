// Package firstparty lists every plugin agentenv's own repository
// provides, whether or not this binary links it, and resolves the other
// names users write for them (qwen3coder is toolformat qwen3_coder).
//
// It is the host's inventory, not the plugin author's: the SDK's registry
// (sdk/builtin) knows only the plugins a binary links; this list is what
// lets a binary built without one (-tags no_ecs) say so instead of "not
// found", and what build instructions are made from.
package firstparty

import (
	"slices"
	"strings"

	"github.com/agentenv/agentenv/sdk"
)

const modulePrefix = "github.com/agentenv/agentenv/"

// Plugin is a plugin agentenv's own repository provides.
type Plugin struct {
	Kind sdk.Kind
	Name string // canonical
	// Aliases are other spellings users may write for Name; CanonicalName
	// resolves them to Name.
	Aliases []string
	// Tag is the build tag that leaves the plugin out of agentenv.
	Tag string
	// Package is the plugin's Go package, the one cmd/agentenv blank-imports.
	Package string
}

// ID is the plugin's full name, <kind>-<name>.
func (p Plugin) ID() string { return string(p.Kind) + "-" + p.Name }

// Command is the package of the plugin's standalone binary,
// <Package>/cmd/agentenv-<kind>-<name>.
func (p Plugin) Command() string { return p.Package + "/cmd/agentenv-" + p.ID() }

// SourceDir is Command as a path inside agentenv's source tree.
func (p Plugin) SourceDir() string {
	return "./" + strings.TrimPrefix(p.Command(), modulePrefix)
}

// list is every first-party plugin, sorted by kind and name. A plugin
// added here also registers itself (sdk/builtin.Register, in its package)
// and gets a build-tagged file in cmd/agentenv; cmd/agentenv's tests fail
// until the three agree.
var list = []Plugin{
	{Kind: sdk.KindReward, Name: "mean", Tag: "no_mean",
		Package: modulePrefix + "plugins/reward-mean"},
	{Kind: sdk.KindSandbox, Name: "ecs", Tag: "no_ecs",
		Package: modulePrefix + "plugins/sandbox-ecs"},
	{Kind: sdk.KindSandbox, Name: "k8s", Tag: "no_k8s",
		Package: modulePrefix + "plugins/sandbox-k8s"},
	{Kind: sdk.KindSandbox, Name: "local", Tag: "no_local",
		Package: modulePrefix + "plugins/sandbox-local"},
	{Kind: sdk.KindToolFormat, Name: "hermes", Tag: "no_hermes",
		Package: modulePrefix + "plugins/toolformat-hermes"},
	// vLLM's --tool-call-parser spelling; the Go package keeps its old name.
	{Kind: sdk.KindToolFormat, Name: "qwen3_coder", Aliases: []string{"qwen3coder", "qwen3-coder"}, Tag: "no_qwen3_coder",
		Package: modulePrefix + "plugins/toolformat-qwen3coder"},
}

// All lists every first-party plugin, sorted by kind and name (copies).
func All() []Plugin {
	out := make([]Plugin, len(list))
	for i, p := range list {
		p.Aliases = slices.Clone(p.Aliases)
		out[i] = p
	}
	return out
}

// AliasOf is the first-party plugin of kind that name is another name of
// (not its canonical name), if any.
func AliasOf(kind sdk.Kind, name string) (Plugin, bool) {
	for _, p := range list {
		if p.Kind == kind && slices.Contains(p.Aliases, name) {
			p.Aliases = slices.Clone(p.Aliases)
			return p, true
		}
	}
	return Plugin{}, false
}

// CanonicalName is the one resolution of plugin names: the canonical name
// of the kind's first-party plugin that name is an alias of (qwen3coder and
// qwen3-coder are toolformat qwen3_coder), or name itself.
func CanonicalName(kind sdk.Kind, name string) string {
	if p, ok := AliasOf(kind, name); ok {
		return p.Name
	}
	return name
}
