package k8scluster

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// dnsbuild/go.mod builds the CoreDNS the harness checks for.
func TestCoreDNSVersionPinned(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("dnsbuild", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "\n\tgithub.com/coredns/coredns "+CoreDNSVersion+"\n") &&
		!strings.Contains(string(b), "\nrequire github.com/coredns/coredns "+CoreDNSVersion+"\n") {
		t.Errorf("dnsbuild/go.mod does not require github.com/coredns/coredns %s:\n%s", CoreDNSVersion, b)
	}
}

// The kubelets point pods at the address CoreDNS binds, for the domain it
// serves.
func TestDNSConfigsAgree(t *testing.T) {
	c := Config{StateDir: "/tmp/x"}.Defaults()
	core := c.corefile()
	for _, want := range []string{"bind " + c.DNSAddr().String() + "\n", "kubernetes " + ClusterDomain + " ", "kubeconfig " + c.path("pki", "coredns.kubeconfig") + "\n"} {
		if !strings.Contains(core, want) {
			t.Errorf("the Corefile lacks %q:\n%s", want, core)
		}
	}
	for _, n := range c.nodes() {
		var kc struct {
			ClusterDNS    []string `json:"clusterDNS"`
			ClusterDomain string   `json:"clusterDomain"`
		}
		if err := yaml.Unmarshal([]byte(n.kubeletConfig()), &kc); err != nil {
			t.Fatal(err)
		}
		if len(kc.ClusterDNS) != 1 || kc.ClusterDNS[0] != c.DNSAddr().String() || kc.ClusterDomain != ClusterDomain {
			t.Errorf("%s's kubelet: clusterDNS %v clusterDomain %q, want [%s] %s", n.Name(), kc.ClusterDNS, kc.ClusterDomain, c.DNSAddr(), ClusterDomain)
		}
	}
}
