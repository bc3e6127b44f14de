package builtin

import (
	"fmt"
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
