package main

import (
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// Start-up errors name what is wrong; serving itself is tested through the
// built binary in gridenv's tests.
func TestRunRefusals(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	busyPort := strconv.Itoa(busy.Addr().(*net.TCPAddr).Port)
	cases := []struct {
		name string
		env  string
		args []string
		want string
	}{
		{"port not a number", "eighty", nil, `AGENTENV_PORT="eighty" is not a port number`},
		{"port out of range", "70000", nil, `AGENTENV_PORT="70000" is not a port number`},
		{"port in use", busyPort, nil, "listening on 127.0.0.1:" + busyPort},
		{"flag port in use", "", []string{"--port", busyPort}, "listening on 127.0.0.1:" + busyPort},
		{"unknown flag", "", []string{"--verbose"}, "flag provided but not defined"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("AGENTENV_PORT", c.env)
			err := run(c.args, hclog.NewNullLogger())
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("run(%v) with AGENTENV_PORT=%q: %v, want an error saying %q", c.args, c.env, err, c.want)
			}
		})
	}
}
