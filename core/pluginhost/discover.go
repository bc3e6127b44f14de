package pluginhost

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/agentenv/agentenv/core/firstparty"
	"github.com/agentenv/agentenv/sdk"
)

// BinaryPrefix starts the file name of every plugin binary:
// agentenv-<kind>-<name>.
const BinaryPrefix = "agentenv-"

// PathEnv is the environment variable holding extra plugin folders, a
// colon-separated list searched before the default folders.
const PathEnv = "AGENTENV_PLUGIN_PATH"

// SourceBuiltin is Entry.Source for a plugin compiled into agentenv.
const SourceBuiltin = "built-in"

// candidate is one plugin found on disk or built in: what to run for it.
type candidate struct {
	kind sdk.Kind
	name string // short name, e.g. "mean"
	path string // executable to run
	args []string
	// builtin is true for plugins served by SelfExe plugin-serve.
	builtin bool
	// problem, when set, is why the file cannot be a plugin (e.g. not
	// executable); such candidates are listed as failed and never run.
	problem string
}

// id is the plugin's full name, <kind>-<name>.
func (c candidate) id() string { return string(c.kind) + "-" + c.name }

// source is what `plugins list` shows in its SOURCE column.
func (c candidate) source() string {
	if c.builtin {
		return SourceBuiltin
	}
	return c.path
}

// ParseID splits a plugin id "<kind>-<name>" (or "<kind>/<name>") into
// its kind and name, as written (see CanonicalName).
func ParseID(id string) (sdk.Kind, string, bool) {
	for _, k := range sdk.Kinds {
		for _, sep := range []string{"-", "/"} {
			if rest, ok := strings.CutPrefix(id, string(k)+sep); ok && sdk.ValidName(rest) {
				return k, rest, true
			}
		}
	}
	return "", "", false
}

// CanonicalName is how the host resolves plugin names: sdk/builtin's
// CanonicalName (qwen3coder and qwen3-coder are toolformat qwen3_coder).
// Every name the host reads, from a caller or from a binary's file name,
// goes through it.
func CanonicalName(kind sdk.Kind, name string) string { return firstparty.CanonicalName(kind, name) }

// DefaultSearchPath is the folders searched for plugin binaries, in order:
// $AGENTENV_PLUGIN_PATH, ~/.agentenv/plugins, then the folder holding
// selfExe.
func DefaultSearchPath(selfExe string) []string {
	var dirs []string
	for _, d := range filepath.SplitList(os.Getenv(PathEnv)) {
		if d != "" {
			dirs = append(dirs, d)
		}
	}
	if home, err := os.UserHomeDir(); err == nil {
		dirs = append(dirs, filepath.Join(home, ".agentenv", "plugins"))
	}
	if selfExe != "" {
		dirs = append(dirs, filepath.Dir(selfExe))
	}
	return dirs
}

// discover lists every plugin: binaries on the search path (the first of
// a name wins) and then the built-ins no binary overrides, sorted by kind
// and name.
func (h *Host) discover() []candidate {
	seen := map[string]bool{}
	var out []candidate
	for _, dir := range h.searchPath {
		entries, err := os.ReadDir(dir)
		if err != nil {
			if !os.IsNotExist(err) {
				h.log.Warn("cannot read plugin folder", "dir", dir, "error", err)
			}
			continue
		}
		for _, e := range entries {
			c, ok := fileCandidate(dir, e)
			if !ok {
				continue
			}
			if seen[c.id()] {
				h.log.Debug("plugin shadowed by an earlier folder", "plugin", c.id(), "path", c.path)
				continue
			}
			seen[c.id()] = true
			out = append(out, c)
		}
	}
	for _, id := range h.builtins {
		kind, name, _ := ParseID(id) // checked by New
		if seen[id] || h.selfExe == "" {
			continue
		}
		seen[id] = true
		out = append(out, candidate{kind: kind, name: name, path: h.selfExe,
			args: []string{"plugin-serve", id}, builtin: true})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].kind != out[j].kind {
			return out[i].kind < out[j].kind
		}
		return out[i].name < out[j].name
	})
	return out
}

// fileCandidate reads a folder entry as a plugin binary, if its name says
// it is one.
func fileCandidate(dir string, e os.DirEntry) (candidate, bool) {
	rest, ok := strings.CutPrefix(e.Name(), BinaryPrefix)
	if !ok {
		return candidate{}, false
	}
	kind, name, ok := ParseID(rest)
	if !ok || strings.Contains(rest, "/") {
		return candidate{}, false
	}
	c := candidate{kind: kind, name: CanonicalName(kind, name), path: filepath.Join(dir, e.Name())}
	fi, err := os.Stat(c.path) // follows symlinks
	switch {
	case err != nil:
		c.problem = fmt.Sprintf("cannot stat: %v", err)
	case !fi.Mode().IsRegular():
		c.problem = "not a regular file"
	case fi.Mode().Perm()&0o111 == 0:
		c.problem = "not executable (chmod +x it)"
	}
	return c, true
}

// resolve finds the plugin kind-name as discovery would; name may be an
// alias. The error, a *NotFoundError, names the plugins of that kind there
// are and no folder: it may reach a remote client.
func (h *Host) resolve(kind sdk.Kind, name string) (candidate, error) {
	name = CanonicalName(kind, name)
	cands := h.discover()
	for _, c := range cands {
		if c.kind == kind && c.name == name {
			return c, nil
		}
	}
	h.log.Debug("plugin not found", "plugin", string(kind)+"-"+name, "looked_for", BinaryPrefix+string(kind)+"-"+name,
		"folders", strings.Join(h.searchPath, string(filepath.ListSeparator)), "built_in", strings.Join(h.builtins, ","))
	return candidate{}, h.notFound(kind, name, cands)
}
