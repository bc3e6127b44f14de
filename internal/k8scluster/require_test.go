package k8scluster

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// recorder is a testing.TB that records Skipf and Fatalf instead of
// stopping the goroutine.
type recorder struct {
	testing.TB
	skipped, failed string
}

func (r *recorder) Helper()                   {}
func (r *recorder) Skipf(f string, a ...any)  { r.skipped = fmt.Sprintf(f, a...) }
func (r *recorder) Fatalf(f string, a ...any) { r.failed = fmt.Sprintf(f, a...) }

// Without a cluster Require skips, saying why and how to get one, except
// under CI=true, where it fails: CI must never pass by skipping them.
func TestRequireWithoutCluster(t *testing.T) {
	empty := t.TempDir()
	// A cluster.json whose apiserver does not answer (port 1 on loopback).
	dead := t.TempDir()
	ca, err := newCA("dead")
	if err != nil {
		t.Fatal(err)
	}
	kc, err := ca.KubeconfigFor("dead", "https://127.0.0.1:1", "admin", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dead, "admin.kubeconfig"), kc, 0o600); err != nil {
		t.Fatal(err)
	}
	info, _ := json.Marshal(Info{Kubeconfig: filepath.Join(dead, "admin.kubeconfig")})
	if err := os.WriteFile(filepath.Join(dead, "cluster.json"), info, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, ci, state, kubeconfig string
		wantSkip, wantFail          bool
		why                         string
	}{
		{name: "no state folder", state: filepath.Join(empty, "none"), wantSkip: true, why: "no such file"},
		{name: "no cluster.json", state: empty, wantSkip: true, why: "no cluster.json"},
		{name: "cluster not answering", state: dead, wantSkip: true, why: "does not answer"},
		{name: "kubeconfig not answering", kubeconfig: filepath.Join(dead, "admin.kubeconfig"), wantSkip: true, why: "does not answer"},
		{name: "CI: no cluster", ci: "true", state: empty, wantFail: true, why: "CI must have it"},
		{name: "CI: not answering", ci: "true", state: dead, wantFail: true, why: "does not answer"},
		{name: "CI other than true skips", ci: "1", state: empty, wantSkip: true, why: "no cluster.json"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("CI", tc.ci)
			t.Setenv(EnvState, tc.state)
			t.Setenv(EnvKubeconfig, tc.kubeconfig)
			r := &recorder{TB: t}
			if c := Require(r); c != nil {
				t.Fatalf("Require returned a cluster: %+v", c.Info)
			}
			if (r.skipped != "") != tc.wantSkip || (r.failed != "") != tc.wantFail {
				t.Fatalf("skipped %q failed %q; want skip %v fail %v", r.skipped, r.failed, tc.wantSkip, tc.wantFail)
			}
			msg := r.skipped + r.failed
			if !strings.Contains(msg, tc.why) {
				t.Errorf("message %q does not say %q", msg, tc.why)
			}
			if tc.wantSkip && !strings.Contains(msg, "make k8s-up") {
				t.Errorf("skip message %q does not say how to start a cluster", msg)
			}
		})
	}
}
