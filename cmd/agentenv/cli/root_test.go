package cli

import (
	"bytes"
	"slices"
	"strings"
	"sync"
	"testing"
)

// Commands read the environment through the Env they were built with,
// never the process's, so tests need no t.Setenv and run in parallel.
func TestCommandsReadTheirEnv(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		want string // a variable the command must ask its Env for
		err  string
	}{
		{"serve's token", []string{"serve", t.TempDir(), "--token-var", "SERVE_TOKEN_FOR_TEST"}, "SERVE_TOKEN_FOR_TEST", "SERVE_TOKEN_FOR_TEST"},
		{"play's token", []string{"play", "http://127.0.0.1:1", "--task", "t", "--token-var", "PLAY_TOKEN_FOR_TEST"}, "PLAY_TOKEN_FOR_TEST", "no server is listening"},
		{"the log level", []string{"sandboxes", "list", "--sandbox", "no-such-sandbox"}, logLevelEnv, "no-such-sandbox"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			var asked []string
			env := Env{Getenv: func(k string) string {
				mu.Lock()
				defer mu.Unlock()
				asked = append(asked, k)
				return ""
			}}
			cmd := NewRootCmdEnv("test", env)
			var out bytes.Buffer
			cmd.SetArgs(tc.args)
			cmd.SetOut(&out)
			cmd.SetErr(&out)
			err := cmd.Execute()
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("error %v, want one with %q\n%s", err, tc.err, out.String())
			}
			mu.Lock()
			defer mu.Unlock()
			if !slices.Contains(asked, tc.want) {
				t.Errorf("asked its Env for %v, want %s among them", asked, tc.want)
			}
		})
	}
}
