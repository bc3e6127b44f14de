package cli

import (
	"bytes"
	"strings"
	"testing"
)

// An unknown flag is answered with the nearest flags of that command, as
// unknown commands and plugin names are: a prefix, a synonym, a typo.
func TestUnknownFlagSuggests(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "examples/gridsim", "--max-concurrent", "3"}, "unknown flag: --max-concurrent; did you mean --max-concurrent-envs?"},
		{[]string{"serve", "examples/gridsim", "--port", "8300"}, "unknown flag: --port; did you mean --addr?"},
		{[]string{"serve", "examples/gridsim", "--port=8300"}, "unknown flag: --port; did you mean --addr?"},
		{[]string{"play", "--tokn-var", "X", "http://127.0.0.1:1"}, "unknown flag: --tokn-var; did you mean --token-var?"},
		{[]string{"transcripts", "list", "--outcom", "failed", "runs"}, "did you mean --outcome?"},
		{[]string{"eval", "--zzzzzz"}, "unknown flag: --zzzzzz\nrun 'agentenv eval --help' for the flags"},
	} {
		cmd := NewRootCmd("test")
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		cmd.SetArgs(tc.args)
		err := cmd.Execute()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}
}
