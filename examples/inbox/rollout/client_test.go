package rollout

import (
	"strings"
	"testing"
)

func TestSessionURL(t *testing.T) {
	cases := []struct{ in, want, err string }{
		{"http://127.0.0.1:8200", "ws://127.0.0.1:8200/ws", ""},
		{"http://127.0.0.1:8200/", "ws://127.0.0.1:8200/ws", ""},
		{"https://envs.example/inbox", "wss://envs.example/inbox/ws", ""},
		{"ws://127.0.0.1:8200/ws", "ws://127.0.0.1:8200/ws", ""},
		{"127.0.0.1:8200", "", "want http://HOST:PORT"},
		{"ftp://127.0.0.1", "", "want http(s):// or ws(s)://"},
		{"http://user:s3cret@127.0.0.1:8200", "", "give the token in its variable"},
	}
	for _, c := range cases {
		got, err := SessionURL(c.in)
		switch {
		case c.err == "" && (err != nil || got != c.want):
			t.Errorf("SessionURL(%q) = %q, %v; want %q", c.in, got, err, c.want)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("SessionURL(%q) = %q, %v; want an error saying %q", c.in, got, err, c.err)
		case err != nil && strings.Contains(err.Error(), "s3cret"):
			t.Errorf("SessionURL(%q): the error shows the token: %v", c.in, err)
		}
	}
}
