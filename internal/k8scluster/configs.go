package k8scluster

import (
	"fmt"
	"strings"
)

// PauseImage is the sandbox image the node's containerd uses, built from
// ./pause and imported at Up (nothing is pulled).
const PauseImage = "agentenv.local/pause:v1"

// containerdConfig keeps every containerd path in the state folder.
// restrict_oom_score_adj: runc cannot lower oom_score_adj without
// CAP_SYS_RESOURCE, which this kind of machine does not grant.
func (n node) containerdConfig() string {
	return fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
oom_score = 0
[grpc]
  address = %[3]q
[ttrpc]
  address = %[4]q
[debug]
  address = %[5]q
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = %[6]q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[7]q
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  disable_apparmor = true
  restrict_oom_score_adj = true
  max_concurrent_downloads = 1
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = "runc"
        Root = %[8]q
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %[9]q
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = %[10]q
`, n.path("containerd", "root"), n.path("containerd", "state"), n.ContainerdSocket(), n.ContainerdSocket()+".ttrpc",
		n.path("containerd", "debug.sock"), n.path("containerd", "opt"), PauseImage, n.path("runc"), n.path("cni", "net.d"),
		n.registryHostsDir())
}

// cniConfig gives each pod a point-to-point veth with a host-local address
// of the node's range, routed by the node: every packet to or from a pod,
// even between two pods of one node, crosses the node's IP stack, so
// kube-proxy's and the policy plugin's netfilter rules see it (a bridge
// would switch same-node traffic past them). No masquerade: the host sees
// pod IPs and routes back to them.
func (n node) cniConfig() string {
	return fmt.Sprintf(`{"cniVersion":"1.0.0","name":%q,"plugins":[{"type":"ptp","ipMasq":false,"mtu":1500,
 "ipam":{"type":"host-local","ranges":[[{"subnet":%q,"gateway":%q}]],"routes":[{"dst":"0.0.0.0/0"}],"dataDir":%q}}]}
`, n.c.Name, n.PodCIDR().String(), n.gateway().String(), n.path("cni", "ipam"))
}

// kubeletConfig: cgroup v1 allowed (failCgroupV1: false), the cluster's
// own cgroup root, kernel defaults checked not written, no image GC (the
// images are imported, not pullable), everything in the state folder. An
// image present is used as it is (NeverVerify): by default the kubelet
// re-pulls, to check credentials, an image it once pulled under another
// name, such as one imported by hand whose content a pod also pulled from
// the registry, and offline that pull fails.
func (n node) kubeletConfig() string {
	c := n.c
	return strings.NewReplacer(
		"@SOCK@", n.ContainerdSocket(),
		"@NODEIP@", n.IP().String(),
		"@PODLOGS@", n.path("podlogs"),
		"@CA@", c.path("pki", "ca.crt"),
		"@CRT@", c.path("pki", n.comp("kubelet")+".crt"),
		"@KEY@", c.path("pki", n.comp("kubelet")+".key"),
		"@CGROOT@", n.CgroupRoot(),
		"@DNS@", c.DNSAddr().String(),
	).Replace(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: @CGROOT@
containerRuntimeEndpoint: unix://@SOCK@
imageServiceEndpoint: unix://@SOCK@
address: @NODEIP@
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
podLogsDir: @PODLOGS@
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: @CA@}
authorization: {mode: Webhook}
tlsCertFile: @CRT@
tlsPrivateKeyFile: @KEY@
clusterDomain: cluster.local
clusterDNS: [@DNS@]
resolvConf: /etc/resolv.conf
failSwapOn: false
maxPods: 250
serializeImagePulls: false
imagePullCredentialsVerificationPolicy: NeverVerify
registerNode: true
nodeStatusUpdateFrequency: 10s
syncFrequency: 10s
fileCheckFrequency: 20s
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
protectKernelDefaults: true
makeIPTablesUtilChains: false
localStorageCapacityIsolation: true
staticPodPath: ""
kubeAPIQPS: 50
kubeAPIBurst: 100
`)
}

// kubeProxyConfig: iptables mode in the node's namespace; NodePorts on the
// node's address only; the host-wide conntrack limits and timeouts left as
// they are (0 means "do not set"), and the OOM score too (lowering it
// needs CAP_SYS_RESOURCE). Traffic to a ClusterIP from outside the pods'
// range (the host, a node) is masqueraded, so its replies come back
// through the node that translated it.
func (n node) kubeProxyConfig() string {
	return strings.NewReplacer(
		"@KUBECONFIG@", n.c.path("pki", "kube-proxy.kubeconfig"),
		"@NODE@", n.Name(),
		"@NODEIP@", n.IP().String(),
		"@PODS@", n.c.ClusterPodCIDR().String(),
	).Replace(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: @KUBECONFIG@
hostnameOverride: @NODE@
bindAddress: @NODEIP@
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
mode: iptables
clusterCIDR: @PODS@
detectLocalMode: ClusterCIDR
nodePortAddresses: [@NODEIP@/32]
oomScoreAdj: 0
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
  udpTimeout: 0s
  udpStreamTimeout: 0s
iptables:
  minSyncPeriod: 1s
  syncPeriod: 30s
`)
}
