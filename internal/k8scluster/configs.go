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
func (c Config) containerdConfig() string {
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
`, c.path("containerd", "root"), c.path("containerd", "state"), c.ContainerdSocket(), c.ContainerdSocket()+".ttrpc",
		c.path("containerd", "debug.sock"), c.path("containerd", "opt"), PauseImage, c.path("runc"), c.path("cni", "net.d"))
}

// cniConfig is a bridge with host-local addresses: the bridge is the pods'
// default gateway, and forwarding in the namespace takes them to the host.
// No masquerade: the host sees pod IPs and routes back to them.
func (c Config) cniConfig() string {
	return fmt.Sprintf(`{"cniVersion":"1.0.0","name":%q,"plugins":[{"type":"bridge","bridge":%q,"isGateway":true,"isDefaultGateway":true,"ipMasq":false,"hairpinMode":false,
 "ipam":{"type":"host-local","ranges":[[{"subnet":%q,"gateway":%q}]],"dataDir":%q}}]}
`, c.Name, c.Bridge(), c.PodCIDR.Masked().String(), c.BridgeIP().String(), c.path("cni", "ipam"))
}

// kubeletConfig: cgroup v1 allowed (failCgroupV1: false), the cluster's
// own cgroup root, kernel defaults checked not written, no image GC (the
// images are imported, not pullable), everything in the state folder.
func (c Config) kubeletConfig() string {
	return strings.NewReplacer(
		"@SOCK@", c.ContainerdSocket(),
		"@NODEIP@", c.NodeIP().String(),
		"@PODLOGS@", c.path("podlogs"),
		"@CA@", c.path("pki", "ca.crt"),
		"@CRT@", c.path("pki", "kubelet.crt"),
		"@KEY@", c.path("pki", "kubelet.key"),
		"@CGROOT@", c.CgroupRoot(),
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
clusterDNS: []
resolvConf: /etc/resolv.conf
failSwapOn: false
maxPods: 250
serializeImagePulls: false
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
