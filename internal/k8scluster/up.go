package k8scluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// UpOptions tune Up.
type UpOptions struct {
	// PauseBinary is the static pause binary for the sandbox image; when
	// empty, Up builds ./pause of RepoDir with CGO_ENABLED=0.
	PauseBinary string
	// RepoDir is the agentenv checkout (for building ./pause).
	RepoDir string
	// Self is the harness binary, run as `Self node-exec` in the node's
	// mount namespace (os.Executable when empty).
	Self string
	Log  hclog.Logger
}

// tools are the host programs Up runs.
var tools = []string{"etcd", "containerd", "runc", "ctr", "ip", "nsenter", "unshare", "iptables", "iptables-restore", "iptables-save"}

// cniPlugins are the CNI plugins the bridge network needs.
var cniPlugins = []string{"ptp", "host-local", "loopback"}

// Up brings the cluster up and returns once both nodes are Ready and
// untainted and the default ServiceAccount exists. A cluster already
// running in the state folder is left as it is. On failure everything made
// so far is torn down and the error carries the failing log's tail.
func Up(ctx context.Context, cfg Config, opts UpOptions) (*Cluster, error) {
	c := cfg.Defaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	log := opts.Log
	if log == nil {
		log = hclog.NewNullLogger()
	}
	if cl, err := Open(c.StateDir); err == nil && cl.Ping(ctx) == nil {
		log.Info("cluster already up", "kubeconfig", cl.Info.Kubeconfig)
		return cl, nil
	}
	if _, err := os.Stat(c.StateDir); err == nil {
		log.Warn("state folder of a cluster that is not running: tearing it down first", "state", c.StateDir)
		if err := Down(ctx, c, log); err != nil {
			return nil, fmt.Errorf("clean up the stale cluster in %s: %w", c.StateDir, err)
		}
	}
	if err := preflight(ctx, c); err != nil {
		return nil, err
	}
	t0 := time.Now()
	cl, err := up(ctx, c, opts, log)
	if err != nil {
		log.Error("up failed: tearing down", "error", err)
		if derr := Down(context.Background(), c, log); derr != nil {
			err = fmt.Errorf("%w (and tearing down: %v)", err, derr)
		}
		return nil, err
	}
	log.Info("cluster up", "took", time.Since(t0).Round(10*time.Millisecond), "kubeconfig", c.AdminKubeconfig())
	return cl, nil
}

// preflight checks what Up needs before it touches anything.
func preflight(ctx context.Context, c Config) error {
	if os.Geteuid() != 0 {
		return errors.New("the cluster needs root (network and mount namespaces, cgroups)")
	}
	var missing []string
	for _, t := range tools {
		if _, err := exec.LookPath(t); err != nil {
			missing = append(missing, t)
		}
	}
	for _, p := range cniPlugins {
		if _, err := os.Stat("/usr/lib/cni/" + p); err != nil {
			missing = append(missing, "/usr/lib/cni/"+p)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing %s: apt-get install etcd-server containerd runc containernetworking-plugins iproute2 util-linux iptables", strings.Join(missing, ", "))
	}
	if _, err := os.Stat("/sys/fs/cgroup/memory/cgroup.procs"); err != nil {
		return errors.New("no cgroup v1 memory hierarchy at /sys/fs/cgroup/memory: the harness is written for cgroup v1 machines")
	}
	if err := CheckCoreDNS(CoreDNSBinary()); err != nil {
		return fmt.Errorf("%w: build it with `make k8s-up` or `k8scluster build`", err)
	}
	if err := CheckBinaries(c.BinDir); err != nil {
		return fmt.Errorf("%w: build them with `make k8s-up` or `k8scluster build`", err)
	}
	if err := CheckRegistry(RegistryBinary()); err != nil {
		return fmt.Errorf("%w: build it with `make k8s-up` or `k8scluster build`", err)
	}
	if err := preflightNetPol(); err != nil {
		return err
	}
	for _, h := range cgroupHierarchies() {
		if _, err := os.Stat(h + c.CgroupRoot()); err == nil {
			return fmt.Errorf("cgroup %s already exists: a cluster named %s is up or was left behind (run `down` with its state folder)", h+c.CgroupRoot(), c.Name)
		}
	}
	return c.checkNetworkFree(ctx)
}

type upRun struct {
	c    Config
	opts UpOptions
	log  hclog.Logger
	t0   time.Time
	// exited is closed when a started process exits while Up runs.
	exited map[string]chan struct{}
}

func up(ctx context.Context, c Config, opts UpOptions, log hclog.Logger) (*Cluster, error) {
	u := &upRun{c: c, opts: opts, log: log, t0: time.Now(), exited: map[string]chan struct{}{}}
	for _, d := range []string{"logs", "pids", "etcd", "images"} {
		if err := os.MkdirAll(c.path(d), 0o755); err != nil {
			return nil, err
		}
	}
	for _, n := range c.nodes() {
		for _, d := range []string{"cni/net.d", "cni/ipam", "containerd", "kubelet", "podlogs"} {
			if err := os.MkdirAll(n.path(d), 0o755); err != nil {
				return nil, err
			}
		}
	}
	if err := os.Chmod(c.StateDir, 0o755); err != nil {
		return nil, err
	}
	pause, err := u.pauseImage(ctx)
	if err != nil {
		return nil, err
	}
	ca, err := makePKI(c.path("pki"), c)
	if err != nil {
		return nil, err
	}
	if err := u.kubeconfigs(ca); err != nil {
		return nil, err
	}
	u.step("certificates and kubeconfigs")
	if err := c.setupNetwork(ctx); err != nil {
		return nil, fmt.Errorf("network: %w", err)
	}
	u.step("network namespaces, veths and routes")
	for _, n := range c.nodes() {
		for name, body := range map[string]string{
			"containerd.toml":                n.containerdConfig(),
			"kubelet.yaml":                   n.kubeletConfig(),
			"cni/net.d/10-agentenv.conflist": n.cniConfig(),
			"kube-proxy.yaml":                n.kubeProxyConfig(),
		} {
			if err := writeFile(n.path(name), []byte(body), 0o644); err != nil {
				return nil, err
			}
		}
	}
	if err := u.start(ctx, "etcd", nil, "etcd", "--name", c.Name, "--data-dir", c.path("etcd", "data"),
		"--listen-client-urls", "http://127.0.0.1:12379", "--advertise-client-urls", "http://127.0.0.1:12379",
		"--listen-peer-urls", "http://127.0.0.1:12380", "--initial-advertise-peer-urls", "http://127.0.0.1:12380",
		"--initial-cluster", c.Name+"=http://127.0.0.1:12380", "--listen-metrics-urls", "http://127.0.0.1:12381",
		"--unsafe-no-fsync",
		// Debian's etcd 3.4 predates watch-progress requests: without
		// periodic progress notifications, fresh watches fail with 504
		// "Too large resource version".
		"--experimental-watch-progress-notify-interval=500ms"); err != nil {
		return nil, err
	}
	pki := func(f string) string { return c.path("pki", f) }
	if err := u.start(ctx, "kube-apiserver", nil, u.bin("kube-apiserver"),
		"--etcd-servers=http://127.0.0.1:12379",
		"--bind-address=0.0.0.0", "--advertise-address="+c.NodeIP().String(), "--secure-port="+strconv.Itoa(c.APIPort),
		"--cert-dir="+c.path("apiserver-certs"),
		"--tls-cert-file="+pki("apiserver.crt"), "--tls-private-key-file="+pki("apiserver.key"),
		"--client-ca-file="+pki("ca.crt"),
		"--kubelet-client-certificate="+pki("apiserver-kubelet-client.crt"), "--kubelet-client-key="+pki("apiserver-kubelet-client.key"),
		"--kubelet-certificate-authority="+pki("ca.crt"), "--kubelet-preferred-address-types=InternalIP",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+pki("sa.pub"), "--service-account-signing-key-file="+pki("sa.key"),
		"--service-cluster-ip-range="+c.ServiceCIDR().String(), "--service-node-port-range=30000-32767",
		"--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction",
		"--allow-privileged=true", "--endpoint-reconciler-type=lease", "--profiling=false", "--v=1"); err != nil {
		return nil, err
	}
	if err := u.waitAPIServer(ctx, ca, "kube-apiserver", u.c.APIServerURL()); err != nil {
		return nil, err
	}
	u.step("apiserver ready")
	if err := u.startDNS(ctx, ca); err != nil {
		return nil, fmt.Errorf("cluster DNS: %w", err)
	}
	if err := u.start(ctx, "kube-scheduler", nil, u.bin("kube-scheduler"),
		"--kubeconfig="+pki("scheduler.kubeconfig"), "--authentication-kubeconfig="+pki("scheduler.kubeconfig"),
		"--authorization-kubeconfig="+pki("scheduler.kubeconfig"),
		"--bind-address=127.0.0.1", "--secure-port=10259", "--leader-elect=false", "--v=1"); err != nil {
		return nil, err
	}
	if err := u.start(ctx, "kube-controller-manager", nil, u.bin("kube-controller-manager"),
		"--kubeconfig="+pki("controller-manager.kubeconfig"), "--authentication-kubeconfig="+pki("controller-manager.kubeconfig"),
		"--authorization-kubeconfig="+pki("controller-manager.kubeconfig"),
		"--bind-address=127.0.0.1", "--secure-port=10257", "--leader-elect=false",
		"--service-account-private-key-file="+pki("sa.key"), "--root-ca-file="+pki("ca.crt"),
		"--cluster-signing-cert-file="+pki("ca.crt"), "--cluster-signing-key-file="+pki("ca.key"),
		"--use-service-account-credentials=true", "--controllers=*", "--v=1"); err != nil {
		return nil, err
	}
	if err := u.startRegistry(ctx); err != nil {
		return nil, err
	}
	u.step("image registry answers")
	if err := c.prepareHostPaths(); err != nil {
		return nil, err
	}
	if err := c.makeCgroupRoot(); err != nil {
		return nil, err
	}
	self := opts.Self
	if self == "" {
		if self, err = os.Executable(); err != nil {
			return nil, err
		}
	}
	for _, n := range c.nodes() {
		if err := u.startNode(ctx, n, self, pause); err != nil {
			return nil, err
		}
	}
	first := c.nodes()[0]
	info := Info{
		Version: Version, StateDir: c.StateDir, Kubeconfig: c.AdminKubeconfig(), Server: c.APIServerURL(),
		NodeName: first.Name(), NodeIP: c.NodeIP().String(), HostIP: c.HostIP().String(), PodCIDR: c.PodCIDR.Masked().String(),
		ServiceCIDR:      c.ServiceCIDR().String(),
		ContainerdSocket: first.ContainerdSocket(), CACert: pki("ca.crt"), CAKey: pki("ca.key"), NetNS: c.NetNSPath(),
	}
	for _, n := range c.nodes() {
		info.Nodes = append(info.Nodes, n.info())
	}
	cl, err := openInfo(info)
	if err != nil {
		return nil, err
	}
	for _, n := range c.nodes() {
		if err := u.waitNode(ctx, cl, n); err != nil {
			return nil, err
		}
	}
	u.step("nodes Ready and untainted, default ServiceAccount present")
	// The kubernetes Service answering from the host through its ClusterIP
	// is node1's kube-proxy at work.
	if err := u.waitAPIServer(ctx, ca, first.comp("kube-proxy"), "https://"+net.JoinHostPort(c.APIServiceIP().String(), "443")); err != nil {
		return nil, err
	}
	u.step("the kubernetes Service answers at its ClusterIP")
	if err := u.waitDNS(ctx); err != nil {
		return nil, err
	}
	u.step("the cluster DNS answers")
	info.DNS = c.DNSAddr().String()
	info.Capabilities = []string{CapNodes, CapServices, CapRegistry, CapDNS}
	info.Registry = c.RegistryAddr()
	if enforced, err := u.startNetPol(ctx, cl, ca); err != nil {
		return nil, err
	} else if enforced {
		info.Capabilities = append(info.Capabilities, CapNetworkPolicy)
	}
	info.Started = time.Now().UTC()
	b, _ := json.MarshalIndent(info, "", "  ")
	if err := writeFile(c.InfoPath(), append(b, '\n'), 0o644); err != nil {
		return nil, err
	}
	cl.Info = info
	return cl, nil
}

func (u *upRun) step(what string) {
	u.log.Info(what, "elapsed", time.Since(u.t0).Round(10*time.Millisecond))
}

func (u *upRun) bin(name string) string { return filepath.Join(u.c.BinDir, name) }

// pauseImage returns the pause binary, building it when not given.
func (u *upRun) pauseImage(ctx context.Context) (string, error) {
	if u.opts.PauseBinary != "" {
		return u.opts.PauseBinary, nil
	}
	repo := u.opts.RepoDir
	if repo == "" {
		var err error
		if repo, err = FindRepo(); err != nil {
			return "", err
		}
	}
	out := u.c.path("images", "pause")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, "./internal/k8scluster/pause")
	cmd.Dir = repo
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build the pause image: %w: %s", err, b)
	}
	return out, nil
}

// kubeconfigs writes the admin kubeconfig (top of the state folder) and
// the components' (pki/).
func (u *upRun) kubeconfigs(ca *CA) error {
	c := u.c
	write := func(path, user string, cred Issued) error {
		b, err := kubeconfig(c.Name, c.APIServerURL(), ca.PEM, user, cred)
		if err != nil {
			return err
		}
		return writeFile(path, b, 0o600)
	}
	names := []string{"admin", "controller-manager", "scheduler", "kube-proxy"}
	for _, n := range c.nodes() {
		names = append(names, n.comp("kubelet"))
	}
	for _, name := range names {
		crt, err := os.ReadFile(c.path("pki", name+".crt"))
		if err != nil {
			return err
		}
		key, err := os.ReadFile(c.path("pki", name+".key"))
		if err != nil {
			return err
		}
		path := c.path("pki", name+".kubeconfig")
		if name == "admin" {
			path = c.AdminKubeconfig()
		}
		if err := write(path, name, Issued{CertPEM: crt, KeyPEM: key}); err != nil {
			return err
		}
	}
	return nil
}

// start runs argv inside the control plane's network namespace, detached
// (its own session), logging to logs/<name>.log, its PID in pids/<name>.pid.
func (u *upRun) start(ctx context.Context, name string, attr *syscall.SysProcAttr, argv ...string) error {
	return u.startAttr(name, u.c.NetNSPath(), attr, nil, argv...)
}

// startNode starts a node's containerd (in a mount namespace of its own,
// through node-exec), imports the pause image, and starts its kubelet in
// the same namespaces.
func (u *upRun) startNode(ctx context.Context, n node, self, pause string) error {
	c := u.c
	if err := u.startAttr(n.comp("containerd"), n.NetNSPath(), &syscall.SysProcAttr{Setsid: true, Unshareflags: syscall.CLONE_NEWNS}, nil,
		self, "node-exec", "--state", c.StateDir, "--node", strconv.Itoa(n.index), "--", "containerd", "--config", n.path("containerd.toml")); err != nil {
		return err
	}
	if err := u.waitFile(ctx, n.comp("containerd"), n.ContainerdSocket(), time.Minute); err != nil {
		return err
	}
	if err := ImportImage(ctx, n.ContainerdSocket(), Image{Source: pause, Ref: PauseImage}); err != nil {
		return err
	}
	u.step(n.Name() + ": containerd up, pause image imported")
	cpid, err := readPID(c.path("pids", n.comp("containerd")+".pid"))
	if err != nil {
		return err
	}
	mnt := []string{"--mount=/proc/" + strconv.Itoa(cpid) + "/ns/mnt"}
	if err := u.startAttr(n.comp("kubelet"), n.NetNSPath(), nil, mnt, u.bin("kubelet"),
		"--root-dir="+n.path("kubelet"), "--config="+n.path("kubelet.yaml"), "--kubeconfig="+c.path("pki", n.comp("kubelet")+".kubeconfig"),
		"--hostname-override="+n.Name(), "--node-ip="+n.IP().String(), "--v=1"); err != nil {
		return err
	}
	return u.startAttr(n.comp("kube-proxy"), n.NetNSPath(), nil, nil, u.bin("kube-proxy"), "--config="+n.path("kube-proxy.yaml"), "--v=1")
}

func (u *upRun) startAttr(name, netns string, attr *syscall.SysProcAttr, nsenterFlags []string, argv ...string) error {
	logf, err := os.OpenFile(u.c.path("logs", name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	args := append([]string{"--net=" + netns}, nsenterFlags...)
	args = append(append(args, "--"), argv...)
	// nsenter execs argv in place: the PID recorded is the component's.
	cmd := exec.Command("nsenter", args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Dir = u.c.StateDir
	if attr == nil {
		attr = &syscall.SysProcAttr{Setsid: true}
	}
	cmd.SysProcAttr = attr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	if err := writeFile(u.c.path("pids", name+".pid"), []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644); err != nil {
		return err
	}
	done := make(chan struct{})
	u.exited[name] = done
	go func() { _ = cmd.Wait(); close(done) }() // reaps it if it dies while Up runs
	return nil
}

// died is the error for a component that exited during Up.
func (u *upRun) died(name string) error {
	return fmt.Errorf("%s exited while the cluster was coming up; the end of %s:\n%s", name, u.c.path("logs", name+".log"), tail(u.c.path("logs", name+".log"), 25))
}

// alive reports the first started component that exited.
func (u *upRun) alive() error {
	for name, ch := range u.exited {
		select {
		case <-ch:
			return u.died(name)
		default:
		}
	}
	return nil
}

func (u *upRun) waitFile(ctx context.Context, name, path string, timeout time.Duration) error {
	return u.poll(ctx, name, timeout, 100*time.Millisecond, func() (bool, error) {
		_, err := os.Stat(path)
		return err == nil, nil
	})
}

// poll calls cond until it is true, a component dies, or timeout.
func (u *upRun) poll(ctx context.Context, what string, timeout, every time.Duration, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		ok, err := cond()
		if ok {
			return nil
		}
		last = err
		if err := u.alive(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after %s (last: %v); the end of its log:\n%s", what, timeout, last, tail(u.c.path("logs", what+".log"), 25))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(every):
		}
	}
}

// waitAPIServer polls the apiserver's /readyz at base from the host (what
// answers is logged as name).
func (u *upRun) waitAPIServer(ctx context.Context, ca *CA, name, base string) error {
	crt, err := tls.LoadX509KeyPair(u.c.path("pki", "admin.crt"), u.c.path("pki", "admin.key"))
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{crt}}}}
	defer hc.CloseIdleConnections()
	return u.poll(ctx, name, 3*time.Minute, 250*time.Millisecond, func() (bool, error) {
		resp, err := hc.Get(base + "/readyz")
		if err != nil {
			return false, err
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, fmt.Errorf("readyz: %s", resp.Status)
	})
}

// waitNode waits for a node to be Ready with no taints, and for the
// default namespace's ServiceAccount.
func (u *upRun) waitNode(ctx context.Context, cl *Cluster, nd node) error {
	return u.poll(ctx, nd.comp("kubelet"), 4*time.Minute, 300*time.Millisecond, func() (bool, error) {
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		n, err := cl.Client.CoreV1().Nodes().Get(qctx, nd.Name(), metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		ready := false
		for _, cond := range n.Status.Conditions {
			ready = ready || cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue
		}
		if !ready {
			return false, errors.New("node not Ready")
		}
		if len(n.Spec.Taints) > 0 {
			return false, fmt.Errorf("node tainted: %v", n.Spec.Taints)
		}
		if _, err := cl.Client.CoreV1().ServiceAccounts("default").Get(qctx, "default", metav1.GetOptions{}); err != nil {
			return false, err
		}
		return true, nil
	})
}

func openInfo(info Info) (*Cluster, error) {
	cl, err := Open(info.Kubeconfig)
	if err != nil {
		return nil, err
	}
	cl.Info = info
	return cl, nil
}

func readPID(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return 0, fmt.Errorf("%s: not a PID: %q", path, b)
	}
	return pid, nil
}

// tail is the last n lines of a file, for error messages.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// FindRepo finds the agentenv checkout from the working directory up.
func FindRepo() (string, error) {
	d, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil && strings.Contains(string(b), "module github.com/agentenv/agentenv\n") {
			return d, nil
		}
		p := filepath.Dir(d)
		if p == d {
			return "", errors.New("not inside the agentenv checkout (no go.mod of github.com/agentenv/agentenv above the working folder)")
		}
		d = p
	}
}
