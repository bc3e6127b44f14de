package firstparty

import (
	"go/build/constraint"
	"slices"
	"strings"
	"testing"

	"github.com/agentenv/agentenv/sdk"
)

// The list is what error messages and build instructions are made from:
// every name, alias and tag must be usable as written.
func TestAll(t *testing.T) {
	fps := All()
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
	// All hands out copies.
	fps[0].Aliases = append(fps[0].Aliases, "changed")
	if slices.Contains(All()[0].Aliases, "changed") {
		t.Error("All shares its slices")
	}
}

func TestCanonicalName(t *testing.T) {
	for _, tc := range []struct {
		kind       sdk.Kind
		name, want string
	}{
		{sdk.KindToolFormat, "qwen3coder", "qwen3_coder"},
		{sdk.KindToolFormat, "qwen3-coder", "qwen3_coder"},
		{sdk.KindToolFormat, "qwen3_coder", "qwen3_coder"},
		{sdk.KindToolFormat, "hermes", "hermes"},
		{sdk.KindSandbox, "qwen3coder", "qwen3coder"}, // aliases are per kind
		{sdk.KindSandbox, "bwrap", "bwrap"},           // not ours: as written
	} {
		if got := CanonicalName(tc.kind, tc.name); got != tc.want {
			t.Errorf("CanonicalName(%s, %q) = %q, want %q", tc.kind, tc.name, got, tc.want)
		}
	}
	if p, ok := AliasOf(sdk.KindToolFormat, "qwen3coder"); !ok || p.ID() != "toolformat-qwen3_coder" {
		t.Errorf("AliasOf(toolformat, qwen3coder) = %v, %v", p, ok)
	}
	if _, ok := AliasOf(sdk.KindToolFormat, "qwen3_coder"); ok {
		t.Error("a canonical name is not an alias")
	}
}
