package k8scluster

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// certValidity is how long the cluster's certificates last: a test
// cluster lives hours, a developer's maybe weeks.
const certValidity = 365 * 24 * time.Hour

// CA is the cluster's certificate authority: it signs every serving and
// client certificate, and KubeconfigFor's.
type CA struct {
	Cert *x509.Certificate
	Key  crypto.Signer
	PEM  []byte // Cert, PEM-encoded
}

// newCA makes a self-signed CA (ECDSA P-256: cheap on a busy machine).
func newCA(cn string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate CA key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(10 * certValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("sign CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key, PEM: pemBlock("CERTIFICATE", der)}, nil
}

// LoadCA reads a CA written by writeCA.
func LoadCA(certFile, keyFile string) (*CA, error) {
	cb, err := os.ReadFile(certFile)
	if err != nil {
		return nil, fmt.Errorf("read cluster CA: %w", err)
	}
	kb, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("read cluster CA key: %w", err)
	}
	blk, _ := pem.Decode(cb)
	if blk == nil || blk.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("%s: no PEM certificate", certFile)
	}
	cert, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", certFile, err)
	}
	kblk, _ := pem.Decode(kb)
	if kblk == nil {
		return nil, fmt.Errorf("%s: no PEM key", keyFile)
	}
	key, err := x509.ParseECPrivateKey(kblk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", keyFile, err)
	}
	return &CA{Cert: cert, Key: key, PEM: cb}, nil
}

// certSpec is one certificate to issue.
type certSpec struct {
	CommonName   string
	Organization []string // Kubernetes reads these as the user's groups
	IPs          []net.IP
	DNSNames     []string
	Server       bool // serverAuth as well as clientAuth
}

// Issued is a signed certificate and its key, PEM-encoded.
type Issued struct {
	CertPEM, KeyPEM []byte
}

// Issue signs a certificate for spec.
func (ca *CA) issue(spec certSpec) (Issued, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Issued{}, fmt.Errorf("generate key for %s: %w", spec.CommonName, err)
	}
	usage := []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	if spec.Server {
		usage = append(usage, x509.ExtKeyUsageServerAuth)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: spec.CommonName, Organization: spec.Organization},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(certValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  usage,
		IPAddresses:  spec.IPs,
		DNSNames:     spec.DNSNames,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		return Issued{}, fmt.Errorf("sign certificate for %s: %w", spec.CommonName, err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return Issued{}, err
	}
	return Issued{CertPEM: pemBlock("CERTIFICATE", der), KeyPEM: pemBlock("EC PRIVATE KEY", kder)}, nil
}

// ClientCert signs a client certificate for a Kubernetes user in groups.
func (ca *CA) ClientCert(user string, groups ...string) (Issued, error) {
	if user == "" {
		return Issued{}, errors.New("client certificate: the user name is empty")
	}
	return ca.issue(certSpec{CommonName: user, Organization: groups})
}

// pkiFiles are the names the cluster's components read, under pki/.
type pkiFiles struct{ dir string }

func (p pkiFiles) crt(name string) string { return filepath.Join(p.dir, name+".crt") }
func (p pkiFiles) key(name string) string { return filepath.Join(p.dir, name+".key") }

// makePKI writes the CA, the serving and client certificates of every
// component and the service-account key pair into dir, and returns the CA.
func makePKI(dir string, c Config) (*CA, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	ca, err := newCA(c.Name + "-ca")
	if err != nil {
		return nil, err
	}
	p := pkiFiles{dir}
	if err := writeFile(p.crt("ca"), ca.PEM, 0o644); err != nil {
		return nil, err
	}
	kder, err := x509.MarshalECPrivateKey(ca.Key.(*ecdsa.PrivateKey))
	if err != nil {
		return nil, err
	}
	if err := writeFile(p.key("ca"), pemBlock("EC PRIVATE KEY", kder), 0o600); err != nil {
		return nil, err
	}
	ips := []net.IP{net.IPv4(127, 0, 0, 1), net.IP(c.NodeIP().AsSlice()), net.IP(c.APIServiceIP().AsSlice())}
	for _, n := range c.nodes() {
		ips = append(ips, net.IP(n.peerIP().AsSlice()))
	}
	specs := map[string]certSpec{
		"apiserver": {CommonName: "kube-apiserver", Server: true, IPs: ips,
			DNSNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}},
		"admin":                    {CommonName: "admin", Organization: []string{"system:masters"}},
		"apiserver-kubelet-client": {CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}},
		"controller-manager":       {CommonName: "system:kube-controller-manager"},
		"scheduler":                {CommonName: "system:kube-scheduler"},
		// The kube-proxy user the default system:node-proxier binding names.
		"kube-proxy": {CommonName: "system:kube-proxy"},
	}
	for _, n := range c.nodes() {
		specs[n.comp("kubelet")] = certSpec{CommonName: "system:node:" + n.Name(), Organization: []string{"system:nodes"}, Server: true,
			IPs: []net.IP{net.IPv4(127, 0, 0, 1), net.IP(n.IP().AsSlice())}, DNSNames: []string{n.Name(), "localhost"}}
	}
	for name, spec := range specs {
		is, err := ca.issue(spec)
		if err != nil {
			return nil, err
		}
		if err := writeFile(p.crt(name), is.CertPEM, 0o644); err != nil {
			return nil, err
		}
		if err := writeFile(p.key(name), is.KeyPEM, 0o600); err != nil {
			return nil, err
		}
	}
	// Service-account tokens are signed with their own key (ES256).
	sa, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	sder, err := x509.MarshalECPrivateKey(sa)
	if err != nil {
		return nil, err
	}
	pub, err := x509.MarshalPKIXPublicKey(sa.Public())
	if err != nil {
		return nil, err
	}
	if err := writeFile(p.key("sa"), pemBlock("EC PRIVATE KEY", sder), 0o600); err != nil {
		return nil, err
	}
	if err := writeFile(filepath.Join(dir, "sa.pub"), pemBlock("PUBLIC KEY", pub), 0o644); err != nil {
		return nil, err
	}
	return ca, nil
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return n
}

// writeFile writes through a temp file and a rename, so a reader never
// sees half a file.
func writeFile(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
