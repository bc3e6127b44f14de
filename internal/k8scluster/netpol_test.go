package k8scluster

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The wrapper module builds the kube-router release the harness checks
// for.
func TestKubeRouterPinned(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("netpolbuild", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "require github.com/cloudnativelabs/kube-router/v2 "+KubeRouterVersion+"\n") {
		t.Errorf("netpolbuild/go.mod does not require kube-router %s", KubeRouterVersion)
	}
}

func TestNetworkPolicyEnv(t *testing.T) {
	for _, tc := range []struct {
		val  string
		on   bool
		fail bool
	}{{"", true, false}, {"on", true, false}, {"off", false, false}, {"no", false, true}} {
		t.Setenv(EnvNetworkPolicy, tc.val)
		on, err := networkPolicyOn()
		if on != tc.on || (err != nil) != tc.fail {
			t.Errorf("%s=%q: on %v, error %v; want on %v, error %v", EnvNetworkPolicy, tc.val, on, err, tc.on, tc.fail)
		}
		if tc.fail && (err == nil || !strings.Contains(err.Error(), "want on or off")) {
			t.Errorf("%s=%q: the error %v does not say what to set", EnvNetworkPolicy, tc.val, err)
		}
	}
}

// Without kube-router in the cache, up refuses before touching anything,
// saying where it looked and how to build it; with the controller off it
// needs none.
func TestPreflightNetPolWithoutBinary(t *testing.T) {
	t.Setenv(EnvCache, t.TempDir())
	t.Setenv(EnvNetworkPolicy, "")
	err := preflightNetPol()
	if err == nil {
		t.Fatal("preflight passed with an empty cache")
	}
	for _, want := range []string{KubeRouterBin(), "missing", "k8scluster build"} {
		if !strings.Contains(err.Error(), want) && !strings.Contains(err.Error(), "apt-get install ipset") {
			t.Errorf("preflight error %q does not say %q", err, want)
		}
	}
	t.Setenv(EnvNetworkPolicy, "off")
	if err := preflightNetPol(); err != nil {
		t.Errorf("with %s=off: %v", EnvNetworkPolicy, err)
	}
}
