package k8scluster

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
)

func parseCert(t *testing.T, b []byte) *x509.Certificate {
	t.Helper()
	blk, _ := pem.Decode(b)
	if blk == nil {
		t.Fatalf("no PEM in %q", b)
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The components' certificates chain to the CA with the usages and names
// the apiserver and kubelet check: a wrong SAN or usage is a cluster that
// never comes up, found only at Up.
func TestMakePKI(t *testing.T) {
	dir := t.TempDir()
	c := Config{StateDir: dir}.Defaults()
	ca, err := makePKI(filepath.Join(dir, "pki"), c)
	if err != nil {
		t.Fatal(err)
	}
	loaded, err := LoadCA(filepath.Join(dir, "pki", "ca.crt"), filepath.Join(dir, "pki", "ca.key"))
	if err != nil {
		t.Fatal(err)
	}
	if !loaded.Cert.Equal(ca.Cert) {
		t.Fatal("LoadCA read another certificate than makePKI wrote")
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	tests := []struct {
		name   string
		cn     string
		org    []string
		usage  x509.ExtKeyUsage
		host   string // must verify for this name/IP when set
		noHost string // must not verify for this name
	}{
		{"apiserver", "kube-apiserver", nil, x509.ExtKeyUsageServerAuth, c.NodeIP().String(), "10.255.0.9"},
		{"apiserver", "kube-apiserver", nil, x509.ExtKeyUsageServerAuth, "kubernetes.default.svc", ""},
		{"apiserver", "kube-apiserver", nil, x509.ExtKeyUsageServerAuth, c.APIServiceIP().String(), ""},
		{"kubelet-node1", "system:node:" + c.nodes()[0].Name(), []string{"system:nodes"}, x509.ExtKeyUsageServerAuth, c.nodes()[0].IP().String(), c.nodes()[1].IP().String()},
		{"kubelet-node2", "system:node:" + c.nodes()[1].Name(), []string{"system:nodes"}, x509.ExtKeyUsageServerAuth, c.nodes()[1].IP().String(), "kubernetes"},
		{"kubelet-node2", "system:node:" + c.nodes()[1].Name(), []string{"system:nodes"}, x509.ExtKeyUsageClientAuth, "", ""},
		{"kube-proxy", "system:kube-proxy", nil, x509.ExtKeyUsageClientAuth, "", ""},
		{"admin", "admin", []string{"system:masters"}, x509.ExtKeyUsageClientAuth, "", ""},
		{"apiserver-kubelet-client", "kube-apiserver-kubelet-client", []string{"system:masters"}, x509.ExtKeyUsageClientAuth, "", ""},
		{"controller-manager", "system:kube-controller-manager", nil, x509.ExtKeyUsageClientAuth, "", ""},
		{"scheduler", "system:kube-scheduler", nil, x509.ExtKeyUsageClientAuth, "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join(dir, "pki", tc.name+".crt"))
			if err != nil {
				t.Fatal(err)
			}
			cert := parseCert(t, b)
			if cert.Subject.CommonName != tc.cn || !slices.Equal(cert.Subject.Organization, tc.org) {
				t.Errorf("subject CN=%q O=%v, want CN=%q O=%v", cert.Subject.CommonName, cert.Subject.Organization, tc.cn, tc.org)
			}
			if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: tc.host, KeyUsages: []x509.ExtKeyUsage{tc.usage}}); err != nil {
				t.Errorf("verify for %q: %v", tc.host, err)
			}
			if tc.noHost != "" {
				if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: tc.noHost}); err == nil {
					t.Errorf("verifies for %q, which it must not name", tc.noHost)
				}
			}
			if fi, err := os.Stat(filepath.Join(dir, "pki", tc.name+".key")); err != nil || fi.Mode().Perm() != 0o600 {
				t.Errorf("key file: %v mode %v, want 0600", err, fi.Mode().Perm())
			}
		})
	}
	for _, f := range []string{"sa.key", "sa.pub"} {
		if _, err := os.Stat(filepath.Join(dir, "pki", f)); err != nil {
			t.Errorf("service-account key: %v", err)
		}
	}
}

// KubeconfigFor's kubeconfig is one client-go loads, pointing at the
// server, trusting the CA, as the user in the groups (which RBAC reads
// from the certificate's subject).
func TestKubeconfigFor(t *testing.T) {
	ca, err := newCA("test-ca")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		user   string
		groups []string
	}{
		{"alice", nil},
		{"agentenv-no-delete", []string{"agentenv:testers", "system:authenticated"}},
	}
	for _, tc := range tests {
		t.Run(tc.user, func(t *testing.T) {
			b, err := ca.KubeconfigFor("c", "https://10.255.0.2:16443", tc.user, tc.groups...)
			if err != nil {
				t.Fatal(err)
			}
			rc, err := clientcmd.RESTConfigFromKubeConfig(b)
			if err != nil {
				t.Fatal(err)
			}
			if rc.Host != "https://10.255.0.2:16443" {
				t.Errorf("server %q", rc.Host)
			}
			cert := parseCert(t, rc.CertData)
			if cert.Subject.CommonName != tc.user || !slices.Equal(cert.Subject.Organization, tc.groups) {
				t.Errorf("CN=%q O=%v, want %q %v", cert.Subject.CommonName, cert.Subject.Organization, tc.user, tc.groups)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(rc.CAData) {
				t.Fatal("no CA in the kubeconfig")
			}
			if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
				t.Errorf("client certificate does not verify against the kubeconfig's CA: %v", err)
			}
			if len(cert.IPAddresses) > 0 || len(cert.DNSNames) > 0 || slices.Contains(cert.ExtKeyUsage, x509.ExtKeyUsageServerAuth) {
				t.Errorf("a user's certificate must be client-only: IPs %v names %v usages %v", cert.IPAddresses, cert.DNSNames, cert.ExtKeyUsage)
			}
		})
	}
	if _, err := ca.KubeconfigFor("c", "https://x", ""); err == nil {
		t.Error("an empty user name was accepted")
	}
}
