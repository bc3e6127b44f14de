package pluginhost

import (
	"fmt"
	"slices"
	"strings"

	"github.com/agentenv/agentenv/core/firstparty"
	"github.com/agentenv/agentenv/sdk"
)

// NotFoundError says a plugin was not found, and what there is instead. It
// names no folder and no path (those are logged at debug level, and
// `agentenv plugins list` shows them), because it may be sent to a remote
// client: an unknown tool_format in a reset is answered with it.
// errors.Is(err, ErrNotFound) holds.
type NotFoundError struct {
	// Kind is "" when the plugin was named without one (plugins inspect).
	Kind sdk.Kind
	Name string // as asked for, alias resolved
	// Available are the plugins of Kind there are, by name (all plugins,
	// by <kind>-<name>, when Kind is ""), sorted.
	Available []string
	// Suggestion is the available plugin nearest to Name, if one is near.
	Suggestion string
	// NotBuiltIn is set when Name is a first-party plugin this binary was
	// built without (-tags no_<name>).
	NotBuiltIn *firstparty.Plugin
}

func (e *NotFoundError) Unwrap() error { return ErrNotFound }

func (e *NotFoundError) Error() string {
	what := fmt.Sprintf("plugin %q", e.Name)
	if e.Kind != "" {
		what = fmt.Sprintf("%s plugin %q", e.Kind, e.Name)
	}
	if f := e.NotBuiltIn; f != nil {
		return fmt.Sprintf("%s is not built into this agentenv binary (builds with -tags %s leave it out); "+
			"rebuild agentenv without that tag, or build the plugin alone into a plugin folder, "+
			"from agentenv's source tree: go build -o ~/.agentenv/plugins/ %s", what, f.Tag, f.SourceDir())
	}
	msg := what + " not found"
	if e.Suggestion != "" {
		msg += fmt.Sprintf("; did you mean %q?", e.Suggestion)
	}
	plural := "plugins"
	if e.Kind != "" {
		plural = string(e.Kind) + " plugins"
	}
	if len(e.Available) == 0 {
		return msg + fmt.Sprintf(" (there are no %s; agentenv plugins list shows where they are looked for)", plural)
	}
	return msg + fmt.Sprintf(" (%s: %s)", plural, strings.Join(e.Available, ", "))
}

// notFound describes a missing plugin of kind (name already canonical)
// among the plugins cands discovery found.
func (h *Host) notFound(kind sdk.Kind, name string, cands []candidate) *NotFoundError {
	e := &NotFoundError{Kind: kind, Name: name}
	var names []string
	for _, c := range cands {
		if c.kind == kind {
			e.Available = append(e.Available, c.name)
			names = append(names, withAliases(c.kind, c.name)...)
		}
	}
	for _, f := range omitted(cands) {
		if f.Kind == kind && f.Name == name {
			e.NotBuiltIn = &f
			return e
		}
	}
	if s := nearest(name, names); s != "" {
		e.Suggestion = CanonicalName(kind, s)
	}
	return e
}

// notFoundAnyKind describes a plugin named without a kind, which no kind
// has. The suggestion is a name; the list holds <kind>-<name> ids.
func (h *Host) notFoundAnyKind(name string, cands []candidate) *NotFoundError {
	e := &NotFoundError{Name: name}
	var names []string
	for _, c := range cands {
		e.Available = append(e.Available, c.id())
		names = append(names, withAliases(c.kind, c.name)...)
	}
	for _, f := range omitted(cands) {
		if f.Name == name || slices.Contains(f.Aliases, name) {
			e.Kind, e.Name, e.NotBuiltIn = f.Kind, f.Name, &f
			return e
		}
	}
	if s := nearest(name, names); s != "" {
		for _, c := range cands {
			if slices.Contains(withAliases(c.kind, c.name), s) {
				s = c.name
				break
			}
		}
		e.Suggestion = s
	}
	return e
}

// Omitted lists the first-party plugins this host can run neither built
// in nor from a binary on the search path: the ones its binary was built
// without.
func (h *Host) Omitted() []firstparty.Plugin { return omitted(h.discover()) }

func omitted(cands []candidate) []firstparty.Plugin {
	have := map[string]bool{}
	for _, c := range cands {
		have[c.id()] = true
	}
	var out []firstparty.Plugin
	for _, f := range firstparty.All() {
		if !have[f.ID()] {
			out = append(out, f)
		}
	}
	return out
}

// withAliases is name and the aliases the first-party list gives it.
func withAliases(kind sdk.Kind, name string) []string {
	for _, f := range firstparty.All() {
		if f.Kind == kind && f.Name == name {
			return append([]string{name}, f.Aliases...)
		}
	}
	return []string{name}
}

// nearest returns the option closest to name, if it is close: a few edits
// away (about one per three letters), the same but for case, or one a
// prefix of the other (qwen3 for qwen3_coder).
func nearest(name string, options []string) string {
	name = strings.ToLower(name)
	best, bestD := "", -1
	for _, o := range options {
		d := editDistance(name, o)
		if bestD < 0 || d < bestD {
			best, bestD = o, d
		}
	}
	if best == "" {
		return ""
	}
	if bestD <= max(1, len(name)/3) {
		return best
	}
	for _, o := range options {
		if len(name) >= 3 && (strings.HasPrefix(o, name) || strings.HasPrefix(name, o)) {
			return o
		}
	}
	return ""
}

// editDistance is the optimal-string-alignment distance between a and b
// (insertions, deletions, substitutions and swaps of neighbours), in bytes:
// plugin names are ASCII.
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}
