package builtin

import (
	"fmt"
	"go/build/constraint"
	"slices"
	"strings"
	"testing"

	"github.com/agentenv/agentenv/sdk"
)

func noop() {}

// mustPanic runs f and returns its panic message, failing if it returns.
func mustPanic(t *testing.T, f func()) (msg string) {
	t.Helper()
	defer func() {
		r := recover()
		if r == nil {
			t.Fatal("no panic")
		}
		msg = fmt.Sprint(r)
	}()
	f()
	return ""
}

func TestRegisterAndLookup(t *testing.T) {
	Register(Plugin{Kind: sdk.KindToolFormat, Name: "zz-test", Serve: noop})
	Register(Plugin{Kind: sdk.KindReward, Name: "zz-test", Serve: noop}) // same name, other kind
	if p, ok := Lookup("toolformat-zz-test"); !ok || p.Kind != sdk.KindToolFormat || p.Name != "zz-test" {
		t.Fatalf("Lookup = %+v, %v", p, ok)
	}
	if _, ok := Lookup("sandbox-zz-test"); ok {
		t.Fatal("found a plugin of a kind nobody registered")
	}
	ids := IDs()
	if !slices.IsSorted(ids) {
		t.Errorf("IDs not sorted: %v", ids)
	}
	if !slices.Contains(ids, "reward-zz-test") || !slices.Contains(ids, "toolformat-zz-test") {
		t.Errorf("IDs = %v", ids)
	}
}

func TestRegisterRefuses(t *testing.T) {
	Register(Plugin{Kind: sdk.KindSandbox, Name: "zz-dup", Serve: noop})
	tests := []struct {
		name string
		p    Plugin
		want []string
	}{
		{"duplicate", Plugin{Kind: sdk.KindSandbox, Name: "zz-dup", Serve: noop},
			[]string{"sandbox-zz-dup registered twice", "builtin_test.go:"}},
		{"alias", Plugin{Kind: sdk.KindToolFormat, Name: "qwen3coder", Serve: noop},
			[]string{`"qwen3coder" is an alias of toolformat-qwen3_coder`, `register the canonical name "qwen3_coder"`}},
		{"bad kind", Plugin{Kind: "rewards", Name: "x", Serve: noop}, []string{`kind "rewards"`}},
		{"bad name", Plugin{Kind: sdk.KindReward, Name: "Mean", Serve: noop}, []string{`name "Mean" is not a plugin name`}},
		{"no serve", Plugin{Kind: sdk.KindReward, Name: "zz-noserve"}, []string{"Serve is nil"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			msg := mustPanic(t, func() { Register(tc.p) })
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("panic %q lacks %q", msg, w)
				}
			}
		})
	}
	if _, ok := Lookup("reward-zz-noserve"); ok {
		t.Error("a refused plugin was registered")
	}
}

// The first-party list is what error messages and build instructions are
// made from: every name, alias and tag must be usable as written.
func TestFirstParties(t *testing.T) {
	fps := FirstParties()
	if len(fps) == 0 {
		t.Fatal("no first-party plugins")
	}
	seen := map[string]string{} // kind-name or alias -> owner
	tags := map[string]bool{}
	for i, f := range fps {
		if i > 0 && (fps[i-1].Kind > f.Kind || fps[i-1].Kind == f.Kind && fps[i-1].Name >= f.Name) {
			t.Errorf("not sorted at %s", f.ID())
		}
		if !slices.Contains(sdk.Kinds, f.Kind) {
			t.Errorf("%s: kind %q", f.ID(), f.Kind)
		}
		for _, n := range append([]string{f.Name}, f.Aliases...) {
			if !sdk.ValidName(n) {
				t.Errorf("%s: %q is not a valid plugin name", f.ID(), n)
			}
			key := string(f.Kind) + "-" + n
			if owner, ok := seen[key]; ok {
				t.Errorf("%s names both %s and %s", key, owner, f.ID())
			}
			seen[key] = f.ID()
		}
		if _, err := constraint.Parse("//go:build !" + f.Tag); err != nil || !strings.HasPrefix(f.Tag, "no_") || tags[f.Tag] {
			t.Errorf("%s: tag %q must be a unique no_<name> build tag (%v)", f.ID(), f.Tag, err)
		}
		tags[f.Tag] = true
		if !strings.HasPrefix(f.Package, modulePrefix+"plugins/") {
			t.Errorf("%s: package %q is not under %splugins/", f.ID(), f.Package, modulePrefix)
		}
		if want := "./plugins/"; !strings.HasPrefix(f.SourceDir(), want) || !strings.HasSuffix(f.SourceDir(), "/cmd/agentenv-"+f.ID()) {
			t.Errorf("%s: SourceDir %q", f.ID(), f.SourceDir())
		}
	}
	// FirstParties hands out copies.
	fps[0].Aliases = append(fps[0].Aliases, "changed")
	if slices.Contains(FirstParties()[0].Aliases, "changed") {
		t.Error("FirstParties shares its slices")
	}
}
