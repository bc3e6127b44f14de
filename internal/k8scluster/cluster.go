package k8scluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Info is what Up records in cluster.json once the cluster is ready: what a
// client needs to find and use it.
type Info struct {
	Version          string     `json:"version"`
	StateDir         string     `json:"state_dir"`
	Kubeconfig       string     `json:"kubeconfig"` // admin (system:masters)
	Server           string     `json:"server"`     // the apiserver, reachable from the host
	NodeName         string     `json:"node_name"`  // the first node's
	NodeIP           string     `json:"node_ip"`    // the control plane's end of the host's link
	HostIP           string     `json:"host_ip"`    // the host's end of the veth
	PodCIDR          string     `json:"pod_cidr"`   // routed from the host through NodeIP; holds ServiceCIDR
	ServiceCIDR      string     `json:"service_cidr"`
	Nodes            []NodeInfo `json:"nodes"`
	ContainerdSocket string     `json:"containerd_socket"` // the first node's
	// Registry is the image registry's host:port (plain HTTP), reachable
	// from the host and the nodes; images named RegistryHost/NAME:TAG are
	// pulled from it (CapRegistry).
	Registry string `json:"registry,omitempty"`
	// Capabilities says what the cluster offers beyond a control plane
	// and a node (CapNodes, CapServices, CapNetworkPolicy).
	Capabilities []string  `json:"capabilities"`
	CACert       string    `json:"ca_cert"`
	CAKey        string    `json:"ca_key"`
	NetNS        string    `json:"netns"` // nsenter --net=<this> runs a command inside
	Started      time.Time `json:"started"`

	// DNS is the cluster DNS's address (port 53), pods' nameserver; set
	// with CapDNS.
	DNS string `json:"dns,omitempty"`
}

// Cluster is a running cluster as a client sees it.
type Cluster struct {
	Info   Info
	Config *rest.Config         // admin
	Client kubernetes.Interface // admin
}

// Open loads the cluster whose admin kubeconfig or state folder is at
// path (the cluster.json beside the kubeconfig, or in the folder, gives
// the rest). It does not check the cluster answers: see Ping.
func Open(path string) (*Cluster, error) {
	var info Info
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("no cluster at %s: %w", path, err)
	}
	infoFile := filepath.Join(filepath.Dir(path), "cluster.json")
	if fi.IsDir() {
		infoFile = filepath.Join(path, "cluster.json")
	}
	b, err := os.ReadFile(infoFile)
	switch {
	case err == nil:
		if err := json.Unmarshal(b, &info); err != nil {
			return nil, fmt.Errorf("%s: %w", infoFile, err)
		}
	case errors.Is(err, fs.ErrNotExist) && !fi.IsDir():
		// A kubeconfig of some other cluster: usable, without the
		// harness's extras (ImportImage, KubeconfigFor).
		info.Kubeconfig = path
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("no cluster in %s (no cluster.json: it is written once `up` has the node Ready)", path)
	default:
		return nil, err
	}
	if !fi.IsDir() {
		info.Kubeconfig = path
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", info.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", info.Kubeconfig, err)
	}
	cfg.QPS, cfg.Burst = 100, 200
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", info.Kubeconfig, err)
	}
	return &Cluster{Info: info, Config: cfg, Client: cs}, nil
}

// Ping checks the apiserver is ready and a node is Ready.
func (c *Cluster) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	body, err := c.Client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("apiserver %s not ready: %w %s", c.Config.Host, err, body)
	}
	nodes, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list nodes on %s: %w", c.Config.Host, err)
	}
	for _, n := range nodes.Items {
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				return nil
			}
		}
	}
	return fmt.Errorf("cluster %s has no Ready node (%d nodes)", c.Config.Host, len(nodes.Items))
}

// ImportImage puts a FROM-scratch image of src (a static binary, or a
// folder holding the image's files) into every node's containerd under
// ref, with entrypoint (default /<base name of src> for a binary).
func (c *Cluster) ImportImage(ctx context.Context, src, ref string, entrypoint ...string) error {
	socks, err := c.containerdSockets(ref)
	if err != nil {
		return err
	}
	for _, s := range socks {
		if err := ImportImage(ctx, s, Image{Source: src, Ref: ref, Entrypoint: entrypoint}); err != nil {
			return err
		}
	}
	return nil
}

// containerdSockets are the nodes' containerd sockets (one, for a
// cluster.json written before there were two nodes).
func (c *Cluster) containerdSockets(ref string) ([]string, error) {
	var socks []string
	for _, n := range c.Info.Nodes {
		socks = append(socks, n.ContainerdSocket)
	}
	if len(socks) == 0 && c.Info.ContainerdSocket != "" {
		socks = []string{c.Info.ContainerdSocket}
	}
	if len(socks) == 0 {
		return nil, fmt.Errorf("import image %s: this cluster was not started by the harness (no containerd socket known)", ref)
	}
	return socks, nil
}

// CA loads the cluster's certificate authority.
func (c *Cluster) CA() (*CA, error) {
	if c.Info.CACert == "" {
		return nil, errors.New("this cluster was not started by the harness (its CA is unknown)")
	}
	return LoadCA(c.Info.CACert, c.Info.CAKey)
}

// KubeconfigFor returns a kubeconfig for user in groups, signed by the
// cluster CA. The user has no rights until a (Cluster)RoleBinding gives
// some: a test binds the Role it means to test.
func (c *Cluster) KubeconfigFor(user string, groups ...string) ([]byte, error) {
	ca, err := c.CA()
	if err != nil {
		return nil, err
	}
	return ca.KubeconfigFor("agentenv-k8s", c.Config.Host, user, groups...)
}
