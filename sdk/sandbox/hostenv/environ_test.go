package hostenv

import (
	"os"
	"slices"
	"testing"

	"github.com/agentenv/agentenv/sdk/sandbox"
)

func TestEnviron(t *testing.T) {
	v := Vars{Port: 31000, ID: "sb-1", Home: "/w", Tmp: "/t"}
	tail := []string{sandbox.EnvPort + "=31000", sandbox.EnvSandboxID + "=sb-1", EnvEnvDir + "=/env", "HOME=/w", "TMPDIR=/t"}
	for _, tc := range []struct {
		name string
		host map[string]string // the plugin's environment
		pass []string
		vars map[string]string
		want []string
	}{
		{
			name: "plain",
			host: map[string]string{"PATH": "/bin", "SECRET": "s"},
			want: append([]string{"PATH=/bin"}, tail...),
		},
		{
			name: "default PATH",
			host: map[string]string{"PATH": ""},
			want: append([]string{"PATH=/usr/local/bin:/usr/bin:/bin"}, tail...),
		},
		{
			name: "pass_env: set ones only, in order",
			host: map[string]string{"PATH": "/bin", "B_KEY": "b", "A_KEY": "a"},
			pass: []string{"B_KEY", "UNSET_KEY", "A_KEY"},
			want: append([]string{"PATH=/bin", "B_KEY=b", "A_KEY=a"}, tail...),
		},
		{
			name: "env vars sorted, agentenv's last",
			host: map[string]string{"PATH": "/bin"},
			vars: map[string]string{"Z": "1", "A": "2", "HOME": "/mine"},
			want: append([]string{"PATH=/bin", "A=2", "HOME=/mine", "Z=1"}, tail...),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, val := range tc.host {
				t.Setenv(k, val)
			}
			t.Setenv("UNSET_KEY", "")
			unsetForTest(t, "UNSET_KEY")
			got := Environ(tc.pass, sandbox.Spec{Dir: "/env", EnvVars: tc.vars}, v)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("Environ =\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}

// unsetForTest unsets name for the rest of t (after a t.Setenv of it,
// which restores it afterwards).
func unsetForTest(t *testing.T, name string) {
	t.Helper()
	if err := os.Unsetenv(name); err != nil {
		t.Fatal(err)
	}
}
