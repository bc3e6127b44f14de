package k8scluster

import (
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestConfigValidate(t *testing.T) {
	// The defaults, not a second cluster's overrides the shell may export.
	for _, e := range []string{EnvName, EnvLink, EnvPods} {
		t.Setenv(e, "")
	}
	ok := Config{StateDir: "/tmp/x"}.Defaults()
	tests := []struct {
		name string
		mod  func(*Config)
		err  string
	}{
		{"defaults", func(*Config) {}, ""},
		{"relative state", func(c *Config) { c.StateDir = "tmp/x" }, "absolute"},
		{"root state", func(c *Config) { c.StateDir = "/" }, "cannot be /"},
		{"long name", func(c *Config) { c.Name = "agentenv-k8s-x" }, "1 to 12"},
		{"bad name", func(c *Config) { c.Name = "Agent_env" }, "only a-z"},
		{"link not /30", func(c *Config) { c.Link = netip.MustParsePrefix("10.255.0.0/24") }, "/30"},
		{"pods too small", func(c *Config) { c.PodCIDR = netip.MustParsePrefix("10.244.0.0/28") }, "/16 to /24"},
		{"overlap", func(c *Config) { c.PodCIDR = netip.MustParsePrefix("10.255.0.0/24") }, "overlaps"},
	}
	for _, tc := range tests {
		c := ok
		tc.mod(&c)
		err := c.Validate()
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%s: Validate() = %v, want %q", tc.name, err, tc.err)
		}
	}
	t.Setenv(EnvLink, "10.255.0.300/30")
	if err := (Config{StateDir: "/tmp/x"}).Defaults().Validate(); err == nil || !strings.Contains(err.Error(), EnvLink) {
		t.Errorf("a malformed %s: Validate() = %v", EnvLink, err)
	}
	t.Setenv(EnvLink, "10.255.0.8/30")
	t.Setenv(EnvName, "second")
	if c := (Config{StateDir: "/tmp/x"}).Defaults(); c.Validate() != nil || c.NodeIP().String() != "10.255.0.10" || c.HostLink() != "second-h" {
		t.Errorf("overrides: node %s link %s: %v", c.NodeIP(), c.HostLink(), c.Validate())
	}
	if ok.HostIP().String() != "10.255.0.1" || ok.NodeIP().String() != "10.255.0.2" {
		t.Errorf("addresses host %s control plane %s", ok.HostIP(), ok.NodeIP())
	}
	// The pod network in quarters: each node's pods, the nodes' links,
	// the Service ClusterIPs; all inside it, so one host route covers them.
	n1, n2 := ok.nodes()[0], ok.nodes()[1]
	got := []string{n1.PodCIDR().String(), n2.PodCIDR().String(), n1.gateway().String(), n1.peerIP().String(), n1.IP().String(),
		n2.peerIP().String(), n2.IP().String(), ok.ServiceCIDR().String(), ok.APIServiceIP().String(), ok.ClusterPodCIDR().String(), n2.Name()}
	want := []string{"10.244.0.0/24", "10.244.1.0/24", "10.244.0.1", "10.244.2.1", "10.244.2.2",
		"10.244.2.5", "10.244.2.6", "10.244.3.0/24", "10.244.3.1", "10.244.0.0/23", "agentenv-k8s-node2"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("addresses:\n got %v\nwant %v", got, want)
	}
	small := ok
	small.PodCIDR = netip.MustParsePrefix("10.244.8.0/24")
	if q := small.ServiceCIDR().String() + " " + small.nodes()[1].PodCIDR().String(); q != "10.244.8.192/26 10.244.8.64/26" {
		t.Errorf("quarters of a /24: %s", q)
	}
	if len(ok.HostLink()) > 15 {
		t.Errorf("link name %q is longer than Linux allows", ok.HostLink())
	}
}

// The wrapper module builds the Version the harness names, with every
// staging module at the matching v0 release, and the client the tests use
// is of the same release.
func TestVersionsPinned(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("k8sbuild", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	mod := string(b)
	if !strings.Contains(mod, "require k8s.io/kubernetes "+Version+"\n") {
		t.Errorf("k8sbuild/go.mod does not require k8s.io/kubernetes %s", Version)
	}
	staging := "v0" + strings.TrimPrefix(Version, "v1")
	pins := regexp.MustCompile(`(?m)^\s+(k8s\.io/\S+) => (\S+) (\S+)$`).FindAllStringSubmatch(mod, -1)
	if len(pins) < 20 {
		t.Errorf("k8sbuild/go.mod pins %d staging modules; k8s.io/kubernetes needs every one replaced", len(pins))
	}
	for _, m := range pins {
		if m[1] != m[2] || m[3] != staging {
			t.Errorf("replace %s => %s %s, want %s", m[1], m[2], m[3], staging)
		}
	}
	root, err := os.ReadFile(filepath.Join("..", "..", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^\s+k8s\.io/client-go ` + regexp.QuoteMeta(staging) + `$`).Match(root) {
		t.Errorf("the root go.mod does not require k8s.io/client-go %s", staging)
	}
}
