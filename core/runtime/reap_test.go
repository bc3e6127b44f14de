package runtime

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/agentenv/agentenv/sdk/sandbox"
)

type fakeReaper struct {
	live    map[string]map[string]string // id -> labels
	failIDs map[string]bool
	listErr error
}

func (f *fakeReaper) List(_ context.Context, labels map[string]string) ([]sandbox.Sandbox, error) {
	if f.listErr != nil {
		return nil, f.listErr
	}
	var out []sandbox.Sandbox
	for id, l := range f.live {
		match := true
		for k, v := range labels {
			if l[k] != v {
				match = false
			}
		}
		if match {
			out = append(out, sandbox.Sandbox{ID: id, Labels: maps.Clone(l)})
		}
	}
	return out, nil
}

func (f *fakeReaper) Terminate(_ context.Context, sb sandbox.Sandbox) error {
	id := sb.ID
	if f.failIDs[id] {
		return errors.New("daemon said no")
	}
	if _, ok := f.live[id]; !ok {
		return fmt.Errorf("sandbox %s: %w", id, sandbox.ErrNotFound)
	}
	delete(f.live, id)
	return nil
}

func TestReap(t *testing.T) {
	mine := map[string]string{sandbox.LabelServer: "abc", "agentenv.episode": "e1"}
	other := map[string]string{sandbox.LabelServer: "xyz"}
	t.Run("only this server's", func(t *testing.T) {
		f := &fakeReaper{live: map[string]map[string]string{"a": mine, "b": mine, "c": other}}
		n, err := Reap(context.Background(), f, "abc")
		if err != nil || n != 2 || len(f.live) != 1 || f.live["c"] == nil {
			t.Fatalf("reaped %d, err %v, left %v", n, err, f.live)
		}
	})
	t.Run("failure named", func(t *testing.T) {
		f := &fakeReaper{live: map[string]map[string]string{"a": mine, "b": mine}, failIDs: map[string]bool{"b": true}}
		n, err := Reap(context.Background(), f, "abc")
		if n != 1 || err == nil || !strings.Contains(err.Error(), "sandbox b") || !strings.Contains(err.Error(), "daemon said no") {
			t.Fatalf("reaped %d, err %v", n, err)
		}
	})
	t.Run("list failure", func(t *testing.T) {
		f := &fakeReaper{listErr: errors.New("plugin down")}
		if _, err := Reap(context.Background(), f, "abc"); err == nil || !strings.Contains(err.Error(), "plugin down") {
			t.Fatalf("err %v", err)
		}
	})
}

func TestServerID(t *testing.T) {
	a, _ := ServerID("examples/gridsim", "127.0.0.1:8200")
	b, _ := ServerID("./examples/gridsim/", "127.0.0.1:8200")
	c, _ := ServerID("examples/gridsim", "127.0.0.1:8201")
	d, _ := ServerID("examples/other", "127.0.0.1:8200")
	if a != b || a == c || a == d || len(a) != 16 {
		t.Fatalf("ids %s %s %s %s", a, b, c, d)
	}
}

func TestPodServerID(t *testing.T) {
	for _, tc := range []struct {
		name     string
		env      map[string]string
		want     string
		whyEmpty string
	}{
		{"in a pod", map[string]string{"POD_NAME": "agentenv-7d9f-abcde", "POD_UID": "0d6c"}, "agentenv-7d9f-abcde", ""},
		{"outside a pod", nil, "", "no POD_NAME"},
		{"name without uid", map[string]string{"POD_NAME": "agentenv-1"}, "", "POD_UID unset: not the downward API"},
		{"not a server id", map[string]string{"POD_NAME": "a/b", "POD_UID": "1"}, "", "a file name cannot hold it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := PodServerID(func(k string) string { return tc.env[k] }); got != tc.want {
				t.Fatalf("PodServerID = %q, want %q (%s)", got, tc.want, tc.whyEmpty)
			}
		})
	}
}
