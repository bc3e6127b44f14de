package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

func TestRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cases := []struct {
		name    string
		args    []string
		want    []string
		wantErr string
	}{
		{"idle through the engine", []string{"--policy", "idle", "--limit", "3"},
			[]string{"idle", "eval", "3", "0.2000"}, ""},
		{"optimal over mcp, markdown", []string{"--policy", "optimal", "--split", "train", "--limit", "2", "--via", "mcp", "--markdown"},
			[]string{"| optimal | 2 | 1.000 | 1.000 | 1.000 | 2 | 0 |"}, ""},
		{"verbose", []string{"--policy", "greedy", "--limit", "1", "-v"}, []string{"greedy\tday/eval-001\t"}, ""},
		{"unknown policy", []string{"--policy", "clever"}, nil, `unknown policy "clever"`},
		{"unknown split", []string{"--split", "test"}, nil, `no split "test"`},
		{"unknown via", []string{"--via", "ws", "--limit", "1"}, nil, `--via "ws"`},
		{"no bundle", []string{"--bundle", t.TempDir() + "/none"}, nil, "no such folder"},
		{"stray argument", []string{"eval"}, nil, "unexpected arguments"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out bytes.Buffer
			err := run(ctx, append([]string{"--bundle", "../.."}, c.args...), &out)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("run: %v\n%s", err, out.String())
			}
			for _, w := range c.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
}
