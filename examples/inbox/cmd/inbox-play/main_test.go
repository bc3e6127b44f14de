package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// Bad flags are refused before anything is played; playing itself is
// tested against a real server in the bundle's end-to-end test.
func TestRunRefusals(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--policy", "greedy"}, `no policy "greedy" (the policies: scripted, reply, wrong)`},
		{[]string{"--policy", "scripted,nope"}, `no policy "nope"`},
		{[]string{"--max-turns", "-1"}, "--max-turns is -1"},
		{[]string{"extra"}, `unexpected argument "extra"`},
		{[]string{"--url", "ftp://x", "--split", "eval"}, `server URL ftp://x: want http://, https://, ws:// or wss://`},
		{[]string{"--url", "ftp://x", "--task", "spam"}, `server URL ftp://x: want http://, https://, ws:// or wss://`},
		{[]string{"--nope"}, "flag provided but not defined"},
	}
	for _, c := range cases {
		var out bytes.Buffer
		err := run(context.Background(), c.args, &out)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("run(%v) = %v, want an error saying %q", c.args, err, c.want)
		}
	}
}
