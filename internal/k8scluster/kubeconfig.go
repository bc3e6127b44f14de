package k8scluster

import (
	"fmt"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// kubeconfig renders a self-contained kubeconfig (certificates inline) for
// one user of the cluster at server.
func kubeconfig(name, server string, caPEM []byte, user string, cred Issued) ([]byte, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[name] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: cred.CertPEM, ClientKeyData: cred.KeyPEM}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: user}
	cfg.CurrentContext = name
	b, err := clientcmd.Write(*cfg)
	if err != nil {
		return nil, fmt.Errorf("render kubeconfig for %s: %w", user, err)
	}
	return b, nil
}

// KubeconfigFor returns a kubeconfig for user in groups, signed by the
// cluster CA, against server: what a test needs to act as a user whose
// rights it controls with a Role and RoleBinding.
func (ca *CA) KubeconfigFor(name, server, user string, groups ...string) ([]byte, error) {
	cred, err := ca.ClientCert(user, groups...)
	if err != nil {
		return nil, err
	}
	return kubeconfig(name, server, ca.PEM, user, cred)
}
