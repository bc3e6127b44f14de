package k8scluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Down tears the cluster in cfg's state folder down: pods first (so the
// kubelet undoes their networks), then the recorded processes, every
// process left in the cluster's network namespace or cgroups, the
// cgroups, the link, route and namespace, the host folders Up created,
// and the state folder. It then checks nothing is left (CheckClean) and
// fails naming what is. Down on a cluster that is not there does nothing.
func Down(ctx context.Context, cfg Config, log hclog.Logger) error {
	c := cfg.Defaults()
	if err := c.Validate(); err != nil {
		return err
	}
	if log == nil {
		log = hclog.NewNullLogger()
	}
	t0 := time.Now()
	var errs []error
	if _, err := os.Stat(c.StateDir); err == nil {
		deletePods(ctx, c, log)
		// The kubelets first, so they restart nothing; then containerd's
		// tasks and shims; then the control plane.
		for _, n := range c.nodes() {
			for _, name := range nodeComponents {
				if name != "containerd" {
					stopPID(c, n.comp(name), log)
				}
			}
		}
		for _, n := range c.nodes() {
			killTasks(ctx, n, log)
			stopPID(c, n.comp("containerd"), log)
		}
		// A one-node cluster's (started before there were two): its
		// shims and pods go with killRest below.
		stopPID(c, "kubelet", log)
		stopPID(c, "containerd", log)
		stopPID(c, "coredns", log)
		for _, name := range []string{"registry", "kube-controller-manager", "kube-scheduler", "kube-apiserver", "etcd"} {
			stopPID(c, name, log)
		}
		killRest(c, log)
	}
	errs = append(errs, c.removeCgroups()...)
	errs = append(errs, c.teardownNetwork(ctx)...)
	created := c.createdHostDirs()
	othersUse, rmErrs := removeCreated(created, log)
	errs = append(errs, rmErrs...)
	if under := mountsUnder(c.StateDir); len(under) > 0 {
		// Never RemoveAll through a mount: it would empty what is mounted.
		errs = append(errs, fmt.Errorf("mounts left under %s, not removing it: %s", c.StateDir, strings.Join(under, ", ")))
	} else if err := os.RemoveAll(c.StateDir); err != nil {
		errs = append(errs, fmt.Errorf("remove %s: %w", c.StateDir, err))
	}
	left := CheckClean(c)
	for _, d := range created {
		if _, err := os.Stat(d); err == nil && !othersUse[d] {
			left = append(left, "folder "+d+" (created by up)")
		}
	}
	if len(left) > 0 {
		errs = append(errs, fmt.Errorf("left behind: %s", strings.Join(left, "; ")))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("down: %w", err)
	}
	log.Info("cluster down, nothing left", "took", time.Since(t0).Round(10*time.Millisecond))
	return nil
}

// deletePods deletes every pod at once so the kubelet tears their
// sandboxes down through CNI, and waits (bounded) for it.
func deletePods(ctx context.Context, c Config, log hclog.Logger) {
	kubelets := false
	for _, n := range c.nodes() {
		kubelets = kubelets || pidAlive(c, n.comp("kubelet"))
	}
	if !kubelets || !pidAlive(c, "kube-apiserver") {
		return
	}
	cl, err := Open(c.AdminKubeconfig())
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 45*time.Second)
	defer cancel()
	nss, err := cl.Client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		log.Warn("cannot list namespaces to delete pods", "error", err)
		return
	}
	zero := int64(0)
	for _, ns := range nss.Items {
		_ = cl.Client.CoreV1().Pods(ns.Name).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
	}
	// Deleted from the apiserver at once with grace 0; the kubelet stops
	// the sandboxes after: wait until containerd runs no task.
	for ctx.Err() == nil {
		left := 0
		for _, n := range c.nodes() {
			left += len(ctrTasks(ctx, n))
		}
		if left == 0 {
			return
		}
		time.Sleep(300 * time.Millisecond)
	}
	log.Warn("pods' sandboxes still running after 45s: killing them")
}

func ctrTasks(ctx context.Context, n node) []string {
	if _, err := os.Stat(n.ContainerdSocket()); err != nil {
		return nil
	}
	out, err := exec.CommandContext(ctx, "ctr", "-a", n.ContainerdSocket(), "-n", "k8s.io", "tasks", "ls", "-q").Output()
	if err != nil {
		return nil
	}
	return strings.Fields(string(out))
}

// killTasks kills a node's containerd tasks and their shims.
func killTasks(ctx context.Context, n node, log hclog.Logger) {
	if pidAlive(n.c, n.comp("containerd")) {
		ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		for _, t := range ctrTasks(ctx, n) {
			_ = exec.CommandContext(ctx, "ctr", "-a", n.ContainerdSocket(), "-n", "k8s.io", "tasks", "kill", "-s", "KILL", t).Run()
		}
		cancel()
	}
	shims, _ := filepath.Glob(n.path("containerd", "state", "io.containerd.runtime.v2.task", "*", "*", "shim.pid"))
	var pids []int
	for _, f := range shims {
		if pid, err := readPID(f); err == nil {
			pids = append(pids, pid)
		}
	}
	killAll(pids, log, "shim")
}

// stopPID sends SIGTERM to a recorded component, SIGKILL after 10s.
func stopPID(c Config, name string, log hclog.Logger) {
	pid, err := readPID(c.path("pids", name+".pid"))
	if err != nil || !ours(c, pid) {
		return
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	if !waitGone([]int{pid}, 10*time.Second) {
		log.Warn("component ignored SIGTERM: killing it", "component", name, "pid", pid)
		_ = syscall.Kill(pid, syscall.SIGKILL)
		waitGone([]int{pid}, 5*time.Second)
	}
}

// killRest kills every process still in the cluster's network namespace
// or cgroups: they can only be the cluster's.
func killRest(c Config, log hclog.Logger) {
	pids := c.cgroupProcs()
	for _, ino := range c.netNSInodes() {
		pids = append(pids, procsInNetNS(ino)...)
	}
	pids = append(pids, procsMentioning(c.StateDir)...)
	killAll(pids, log, "leftover")
}

func killAll(pids []int, log hclog.Logger, what string) {
	self := os.Getpid()
	var live []int
	for _, p := range pids {
		if p > 1 && p != self && syscall.Kill(p, 0) == nil {
			log.Debug("killing", "what", what, "pid", p)
			_ = syscall.Kill(p, syscall.SIGKILL)
			live = append(live, p)
		}
	}
	waitGone(live, 10*time.Second)
}

// ours reports whether pid still runs something of this cluster (a PID
// file may outlive its process and the PID be reused).
func ours(c Config, pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return false
	}
	if strings.Contains(string(b), c.StateDir) {
		return true
	}
	for _, ino := range c.netNSInodes() {
		if netNSOf(pid) == ino {
			return true
		}
	}
	return false
}

func pidAlive(c Config, name string) bool {
	pid, err := readPID(c.path("pids", name+".pid"))
	return err == nil && ours(c, pid)
}

// waitGone waits until every pid has exited (or is a zombie).
func waitGone(pids []int, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for {
		alive := false
		for _, p := range pids {
			if procRunning(p) {
				alive = true
			}
		}
		if !alive {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// procRunning: exists and is not a zombie.
func procRunning(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndex(s, ")")
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

func pids() []int {
	ents, _ := os.ReadDir("/proc")
	var ps []int
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			ps = append(ps, pid)
		}
	}
	return ps
}

func netNSOf(pid int) uint64 {
	var st syscall.Stat_t
	if err := syscall.Stat("/proc/"+strconv.Itoa(pid)+"/ns/net", &st); err != nil {
		return 0
	}
	return st.Ino
}

func procsInNetNS(ino uint64) []int {
	var out []int
	for _, p := range pids() {
		if netNSOf(p) == ino {
			out = append(out, p)
		}
	}
	return out
}

// procsMentioning lists the component processes whose command line names
// dir (the components and shims all take paths in the state folder).
func procsMentioning(dir string) []int {
	self := os.Getpid()
	var out []int
	for _, p := range pids() {
		if p == self {
			continue
		}
		b, err := os.ReadFile("/proc/" + strconv.Itoa(p) + "/cmdline")
		if err == nil && strings.Contains(string(b), dir+"/") && procRunning(p) && isComponent(p) {
			out = append(out, p)
		}
	}
	return out
}

// componentExes are the programs a cluster runs outside its pods; a
// developer's `tail -f <state>/logs/...` is not one of them.
var componentExes = []string{"etcd", "containerd", "containerd-shim", "containerd-shim-runc-v2", "runc", "nsenter", "kube-apiserver", "kube-scheduler", "kube-controller-manager", "kubelet", "kube-proxy", kubeRouter}

func isComponent(pid int) bool {
	exe, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe")
	if err != nil {
		return false
	}
	base := filepath.Base(strings.TrimSuffix(exe, " (deleted)"))
	for _, e := range componentExes {
		if base == e {
			return true
		}
	}
	return false
}

func mountsUnder(dir string) []string {
	var out []string
	for _, m := range mountPoints() {
		if m == dir || strings.HasPrefix(m, dir+"/") {
			out = append(out, m)
		}
	}
	return out
}

// CheckClean lists what of a cluster is left on the machine outside (or
// as) its state folder: its processes, cgroups, link, routes, mounts, the
// state folder itself, and anything in the host folders the node's are
// bound over. Empty means clean.
func CheckClean(cfg Config) []string {
	c := cfg.Defaults()
	var left []string
	if _, err := os.Stat(c.StateDir); err == nil {
		left = append(left, "state folder "+c.StateDir)
	}
	for _, p := range procsMentioning(c.StateDir) {
		cmd, _ := os.ReadFile("/proc/" + strconv.Itoa(p) + "/cmdline")
		left = append(left, fmt.Sprintf("process %d (%s)", p, strings.ReplaceAll(strings.TrimRight(string(cmd), "\x00"), "\x00", " ")))
	}
	for _, h := range cgroupHierarchies() {
		if _, err := os.Stat(h + c.CgroupRoot()); err == nil {
			left = append(left, "cgroup "+h+c.CgroupRoot())
		}
	}
	if _, err := os.Stat("/sys/class/net/" + c.HostLink()); err == nil {
		left = append(left, "network link "+c.HostLink())
	}
	if rs, err := hostRoutes(context.Background()); err == nil {
		for _, r := range rs {
			if r.dst.Overlaps(c.PodCIDR) || strings.Contains(r.line, " via "+c.NodeIP().String()+" ") {
				left = append(left, "route "+r.line)
			}
		}
	}
	for _, m := range mountsUnder(c.StateDir) {
		left = append(left, "mount "+m)
	}
	for _, m := range mountPoints() {
		for _, hp := range hostPaths {
			if m == hp {
				left = append(left, "mount "+m+" in the host's mount namespace")
			}
		}
	}
	for _, hp := range hostPaths[:4] { // /run/containerd may be a system containerd's
		if ents, err := os.ReadDir(hp); err == nil && len(ents) > 0 {
			names := make([]string, 0, len(ents))
			for _, e := range ents {
				names = append(names, e.Name())
			}
			sort.Strings(names)
			left = append(left, fmt.Sprintf("files in %s (%s): the node wrote there outside its state folder", hp, strings.Join(names, ", ")))
		}
	}
	return left
}

// ComponentPID is one recorded component process.
type ComponentPID struct {
	Name    string
	PID     int
	Running bool
}

// ComponentPIDs lists the components Up recorded and whether each runs.
func ComponentPIDs(cfg Config) []ComponentPID {
	c := cfg.Defaults()
	var out []ComponentPID
	names := []string{"etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager", "registry", "coredns"}
	for _, n := range c.nodes() {
		for _, name := range nodeComponents {
			names = append(names, n.comp(name))
		}
	}
	for _, name := range names {
		pid, err := readPID(c.path("pids", name+".pid"))
		if err != nil {
			continue
		}
		out = append(out, ComponentPID{Name: name, PID: pid, Running: ours(c, pid) && procRunning(pid)})
	}
	return out
}

// removeCreated removes the folders Up created (outermost first in
// created), innermost first. One another program has put something in
// since is left in place and returned in othersUse, with the folders
// holding it: the node wrote only into its private folder bound over it,
// so what the host's folder holds is not the cluster's (Docker's
// containerd puts its shims' sockets in /run/containerd/s).
func removeCreated(created []string, log hclog.Logger) (othersUse map[string]bool, errs []error) {
	othersUse = map[string]bool{}
	for i := len(created) - 1; i >= 0; i-- {
		err := os.Remove(created[i])
		switch {
		case err == nil || errors.Is(err, os.ErrNotExist):
		case errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST):
			othersUse[created[i]] = true
			log.Warn("a mount point Up created is in use by another program now; left in place", "folder", created[i], "holds", entryNames(created[i]))
		default:
			errs = append(errs, fmt.Errorf("remove the mount point Up created, %s: %w", created[i], err))
		}
	}
	return othersUse, errs
}

// entryNames lists a folder's entries, for a log line.
func entryNames(dir string) string {
	es, _ := os.ReadDir(dir)
	names := make([]string, len(es))
	for i, e := range es {
		names[i] = e.Name()
	}
	return strings.Join(names, ", ")
}
