package cli

import (
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/agentenv/agentenv/core/spelling"
)

// flagSynonyms are names users reach for that agentenv spells otherwise.
var flagSynonyms = map[string]string{
	"port": "addr", "host": "addr", "listen": "addr", "bind": "addr", "address": "addr",
	"token": "token-var", "concurrency": "max-concurrent-envs", "max-envs": "max-concurrent-envs",
}

// flagError words pflag's error for a flag the command lacks with the
// flags it has that come closest, as commands and plugin names are
// suggested; other flag errors pass as they are.
func flagError(cmd *cobra.Command, err error) error {
	msg := err.Error()
	name, ok := strings.CutPrefix(msg, "unknown flag: --")
	if !ok {
		return err
	}
	if s := suggestFlags(name, cmd.Flags()); len(s) > 0 {
		return fmt.Errorf("%s; did you mean %s?\nrun '%s --help' for the flags", msg, "--"+strings.Join(s, " or --"), cmd.CommandPath())
	}
	return fmt.Errorf("%s\nrun '%s --help' for the flags", msg, cmd.CommandPath())
}

// suggestFlags are the flags of fs close to name: a synonym's, those name
// begins (--max-concurrent for --max-concurrent-envs), or a few edits
// away (about one per three letters).
func suggestFlags(name string, fs *pflag.FlagSet) []string {
	name = strings.ToLower(name)
	name, _, _ = strings.Cut(name, "=")
	var out []string
	seen := map[string]bool{}
	add := func(f string) {
		if !seen[f] && fs.Lookup(f) != nil {
			seen[f] = true
			out = append(out, f)
		}
	}
	if s, ok := flagSynonyms[name]; ok {
		add(s)
	}
	var near []string
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		switch {
		case len(name) >= 3 && strings.HasPrefix(f.Name, name):
			near = append(near, f.Name)
		case spelling.Close(name, f.Name):
			near = append(near, f.Name)
		}
	})
	sort.Strings(near)
	for _, f := range near {
		add(f)
	}
	if len(out) > 3 {
		out = out[:3]
	}
	return out
}
