package k8scluster

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// The node (containerd + kubelet) runs in a private mount namespace: there
// the host sysctls the kubelet insists on are masked with read-only files
// holding the values it wants (it checks them with protectKernelDefaults
// instead of writing them host-wide), and the host paths the kubelet,
// containerd and libcni hard-code are bind mounts of folders in the state
// folder.

// kernelDefaults are the sysctls the kubelet requires (its
// setupKernelTunables).
var kernelDefaults = []struct{ key, value string }{
	{"vm/overcommit_memory", "1"},
	{"vm/panic_on_oom", "0"},
	{"kernel/panic", "10"},
	{"kernel/panic_on_oops", "1"},
	{"kernel/keys/root_maxkeys", "1000000"},
	{"kernel/keys/root_maxbytes", "25000000"},
}

// hostPaths are the host folders the node writes to whatever its
// configuration says: bound to private folders in the node's namespace.
var hostPaths = []string{"/var/lib/kubelet", "/var/lib/cni", "/var/log/containers", "/var/log/pods", "/run/containerd"}

// hostDirsFile records the host folders Up had to create as mount points
// (Down removes them).
func (c Config) hostDirsFile() string { return c.path("created-host-dirs") }

// prepareHostPaths creates the mount points that do not exist and records
// every folder it created, outermost first.
func (c Config) prepareHostPaths() error {
	var created []string
	for _, p := range hostPaths {
		var missing []string
		for d := p; d != "/"; d = filepath.Dir(d) {
			if _, err := os.Stat(d); err == nil {
				break
			}
			missing = append([]string{d}, missing...)
		}
		for _, d := range missing {
			if err := os.Mkdir(d, 0o755); err != nil {
				return fmt.Errorf("create mount point %s: %w", d, err)
			}
			created = append(created, d)
		}
		for _, n := range c.nodes() {
			if err := os.MkdirAll(n.hostPath(p), 0o755); err != nil {
				return err
			}
		}
	}
	var old []string
	if b, err := os.ReadFile(c.hostDirsFile()); err == nil {
		old = strings.Fields(string(b))
	}
	return writeFile(c.hostDirsFile(), []byte(strings.Join(append(old, created...), "\n")+"\n"), 0o644)
}

// createdHostDirs are the folders prepareHostPaths made.
func (c Config) createdHostDirs() []string {
	b, err := os.ReadFile(c.hostDirsFile())
	if err != nil {
		return nil
	}
	return strings.Fields(string(b))
}

// hostPath is the node's private folder bound over the host path p.
func (n node) hostPath(p string) string {
	return n.path("host", strings.ReplaceAll(strings.TrimPrefix(p, "/"), "/", "_"))
}

// NodeExec runs as the first process of a node's mount namespace (Up
// starts it with CLONE_NEWNS, which Go makes recursively private): it masks
// the kernel defaults, binds the host paths to node index's folders, then
// becomes argv (containerd).
func NodeExec(stateDir string, index int, argv []string) error {
	if len(argv) == 0 {
		return errors.New("node-exec: no command")
	}
	if index < 1 || index > NodeCount {
		return fmt.Errorf("node-exec: node %d: the cluster has nodes 1 to %d", index, NodeCount)
	}
	n := node{c: Config{StateDir: stateDir}, index: index}
	if err := os.MkdirAll(n.path("fakesys"), 0o755); err != nil {
		return err
	}
	for _, kd := range kernelDefaults {
		target := "/proc/sys/" + kd.key
		cur, err := os.ReadFile(target)
		if err != nil {
			return fmt.Errorf("node-exec: read %s: %w", target, err)
		}
		if strings.TrimSpace(string(cur)) == kd.value {
			continue
		}
		f := n.path("fakesys", strings.ReplaceAll(kd.key, "/", "_"))
		if err := os.WriteFile(f, []byte(kd.value+"\n"), 0o444); err != nil {
			return err
		}
		if err := bindReadOnly(f, target); err != nil {
			return err
		}
	}
	for _, p := range hostPaths {
		src := n.hostPath(p)
		if err := syscall.Mount(src, p, "", syscall.MS_BIND, ""); err != nil {
			return fmt.Errorf("node-exec: bind %s over %s: %w", src, p, err)
		}
	}
	bin, err := exec.LookPath(argv[0])
	if err != nil {
		return fmt.Errorf("node-exec: %w", err)
	}
	return syscall.Exec(bin, argv, os.Environ())
}

func bindReadOnly(src, dst string) error {
	if err := syscall.Mount(src, dst, "", syscall.MS_BIND, ""); err != nil {
		return fmt.Errorf("node-exec: bind %s over %s: %w", src, dst, err)
	}
	if err := syscall.Mount("", dst, "", syscall.MS_BIND|syscall.MS_REMOUNT|syscall.MS_RDONLY, ""); err != nil {
		return fmt.Errorf("node-exec: make %s read-only: %w", dst, err)
	}
	return nil
}

// cgroupHierarchies are the mounted cgroup v1 hierarchies (one folder per
// controller, or named, under /sys/fs/cgroup).
func cgroupHierarchies() []string {
	ents, err := os.ReadDir("/sys/fs/cgroup")
	if err != nil {
		return nil
	}
	var hs []string
	for _, e := range ents {
		p := filepath.Join("/sys/fs/cgroup", e.Name())
		if fi, err := os.Lstat(p); err != nil || !fi.IsDir() {
			continue // cpu,cpuacct style symlinks point at one already listed
		}
		if _, err := os.Stat(filepath.Join(p, "cgroup.procs")); err == nil {
			hs = append(hs, p)
		}
	}
	return hs
}

// makeCgroupRoot creates the cluster's cgroup and each node's kubelet
// cgroup root inside it, in every hierarchy (the kubelet requires its root
// to exist); a cpuset needs its CPUs and memory nodes before any task may
// join, so those are copied from the parent.
func (c Config) makeCgroupRoot() error {
	if err := c.own("cgroups"); err != nil {
		return err
	}
	dirs := []string{c.CgroupRoot()}
	for _, n := range c.nodes() {
		dirs = append(dirs, n.CgroupRoot())
	}
	for _, h := range cgroupHierarchies() {
		for _, cg := range dirs {
			d := h + cg
			if err := os.Mkdir(d, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("create cgroup %s: %w", d, err)
			}
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				if v, err := os.ReadFile(filepath.Join(filepath.Dir(d), f)); err == nil {
					if err := os.WriteFile(filepath.Join(d, f), v, 0o644); err != nil {
						return fmt.Errorf("cgroup %s: %s: %w", d, f, err)
					}
				}
			}
		}
	}
	return nil
}

// cgroupProcs lists the PIDs in the cluster's cgroup subtree (pods'
// processes), over every hierarchy.
func (c Config) cgroupProcs() []int {
	if !c.owns("cgroups") {
		return nil
	}
	seen := map[int]bool{}
	var pids []int
	for _, h := range cgroupHierarchies() {
		_ = filepath.WalkDir(h+c.CgroupRoot(), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
				return nil
			}
			b, _ := os.ReadFile(p)
			for _, f := range strings.Fields(string(b)) {
				var pid int
				if _, err := fmt.Sscan(f, &pid); err == nil && !seen[pid] {
					seen[pid] = true
					pids = append(pids, pid)
				}
			}
			return nil
		})
	}
	return pids
}

// removeCgroups removes the cluster's cgroup subtree, deepest first.
func (c Config) removeCgroups() []error {
	var errs []error
	if !c.owns("cgroups") {
		return nil // another cluster's, if any
	}
	for _, h := range cgroupHierarchies() {
		root := h + c.CgroupRoot()
		var dirs []string
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			if err := syscall.Rmdir(dirs[i]); err != nil && !errors.Is(err, syscall.ENOENT) {
				errs = append(errs, fmt.Errorf("remove cgroup %s: %w", dirs[i], err))
			}
		}
	}
	return errs
}

// own records, in the state folder, that this cluster made a thing that
// lives outside it (its network link, its cgroups, its namespace), before
// making it: Down removes only what its state folder says it made, never
// a same-named thing of another cluster.
func (c Config) own(what string) error {
	f, err := os.OpenFile(c.path("owned"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintln(f, what); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func (c Config) owns(what string) bool {
	b, err := os.ReadFile(c.path("owned"))
	if err != nil {
		return false
	}
	for _, l := range strings.Fields(string(b)) {
		if l == what {
			return true
		}
	}
	return false
}
