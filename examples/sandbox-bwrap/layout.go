package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Paths inside a sandbox. The host's root is visible read-only; these are
// the sandbox's own.
const (
	sbWork  = "/agentenv/work"                       // the env's writable folder: its HOME and working dir
	sbRun   = "/agentenv/run"                        // the relay's socket (network off)
	sbRelay = "/agentenv/bin/agentenv-sandbox-bwrap" // this binary, run as the relay (network off)
	sbTmp   = "/tmp"                                 // the env's private /tmp
)

// reservedPaths are set up by the sandbox; binds may not target them.
var reservedPaths = []string{"/agentenv", "/tmp", "/proc", "/dev"}

// layout is what a sandbox looks like from inside, kept in its state file
// so a command run later (Exec) sees the same sandbox as the env, whatever
// the plugin's configuration is by then.
type layout struct {
	ID       string   `json:"id"`
	Root     string   `json:"root"`    // the sandbox's folder on the host: work/, tmp/, run/
	EnvDir   string   `json:"env_dir"` // the env's folder in its bundle, visible read-only
	Network  bool     `json:"network"`
	Binds    []bind   `json:"binds,omitempty"`
	Hide     []string `json:"hide,omitempty"`
	StateDir string   `json:"state_dir"`
	Limits   Limits   `json:"limits"`
}

func sandboxRoot(stateDir, id string) string { return filepath.Join(stateDir, id) }
func relaySocket(root string) string         { return filepath.Join(root, "run", "relay.sock") }

// maxSocketPath is the longest path a unix socket may have (sun_path less
// its terminating NUL).
const maxSocketPath = 107

// bwrapArgs is bwrap's command line for the sandbox, up to and including
// "--": new PID, IPC and UTS namespaces (and network, when it is off), the
// host's root read-only, a private /dev, /proc and /tmp, the writable work
// folder, and the state dir hidden. env is true for the env itself (its
// relay, when the network is off), false for a command run by Exec.
func (l layout) bwrapArgs(env bool, exe string) ([]string, error) {
	a := []string{
		"--unshare-pid", "--unshare-ipc", "--unshare-uts", "--hostname", l.ID,
		"--new-session",
		// Root in the sandbox is root without capabilities: it cannot
		// remount the read-only root or leave the namespaces.
		"--cap-drop", "ALL",
		// The env's sandbox outlives this plugin process (its parent is the
		// keeper, see keeper.go); a command run by Exec dies with it.
		"--die-with-parent",
	}
	if !l.Network {
		a = append(a, "--unshare-net")
	}
	root, err := rootBinds()
	if err != nil {
		return nil, err
	}
	a = append(a, root...)
	a = append(a, "--dev", "/dev", "--proc", "/proc")
	a = append(a, procCovers()...)
	a = append(a,
		"--bind", filepath.Join(l.Root, "tmp"), sbTmp,
		"--bind", filepath.Join(l.Root, "work"), sbWork)
	if env && !l.Network {
		a = append(a, "--bind", filepath.Join(l.Root, "run"), sbRun, "--ro-bind", exe, sbRelay)
	}
	hidden, err := l.hidden()
	if err != nil {
		return nil, err
	}
	var covered []string
	for _, h := range hidden {
		if h.dir {
			a = append(a, "--tmpfs", h.path)
			covered = append(covered, h.path)
		} else {
			a = append(a, "--ro-bind", "/dev/null", h.path)
		}
	}
	// The env's own folder stays visible even under a hidden path (or
	// /tmp, which is the sandbox's own).
	a = append(a, "--ro-bind", l.EnvDir, l.EnvDir)
	for _, b := range l.Binds {
		a = append(a, "--ro-bind", b.From, b.To)
	}
	for _, c := range covered {
		a = append(a, "--remount-ro", c)
	}
	return append(a, "--remount-ro", "/", "--chdir", sbWork, "--"), nil
}

// rootBinds mounts each entry of the host's / read-only at the same place,
// except those the sandbox makes its own. Binding the entries, rather than
// / itself, leaves the sandbox's root a tmpfs of bwrap's in which /agentenv
// can be made; it is remounted read-only last.
func rootBinds() ([]string, error) {
	entries, err := os.ReadDir("/")
	if err != nil {
		return nil, fmt.Errorf("reading /: %w", err)
	}
	var a []string
	for _, e := range entries {
		path := "/" + e.Name()
		if isReserved(path) {
			continue
		}
		switch {
		case e.Type()&os.ModeSymlink != 0:
			target, err := os.Readlink(path)
			if err != nil {
				return nil, fmt.Errorf("reading link %s: %w", path, err)
			}
			a = append(a, "--symlink", target, path)
		case e.IsDir() || e.Type().IsRegular():
			a = append(a, "--ro-bind", path, path)
		}
	}
	return a, nil
}

// procCovers makes the parts of the sandbox's /proc that act on the whole
// machine read-only, and hides those that show its secrets, as container
// runtimes do. Root in a sandbox has no capabilities, but files such as
// /proc/sys/kernel/core_pattern and /proc/sysrq-trigger only ask to be
// root.
func procCovers() []string {
	var a []string
	for _, p := range []string{"/proc/sys", "/proc/sysrq-trigger", "/proc/fs", "/proc/irq", "/proc/bus"} {
		a = append(a, "--ro-bind-try", p, p)
	}
	for _, p := range []string{"/proc/kcore", "/proc/keys", "/proc/timer_list", "/proc/sched_debug", "/proc/latency_stats"} {
		if _, err := os.Stat(p); err == nil {
			a = append(a, "--ro-bind", "/dev/null", p)
		}
	}
	for _, p := range []string{"/proc/acpi", "/proc/scsi"} {
		if info, err := os.Stat(p); err == nil && info.IsDir() {
			a = append(a, "--tmpfs", p, "--remount-ro", p)
		}
	}
	return a
}

func isReserved(path string) bool {
	for _, r := range reservedPaths {
		if path == r || strings.HasPrefix(path, r+"/") {
			return true
		}
	}
	return false
}

type hiddenPath struct {
	path string
	dir  bool
}

// hidden resolves the paths to hide: the configured ones and the state dir
// (every sandbox's files, and the state files holding envs' variables).
// Paths that do not exist, or lie where the sandbox has its own mounts
// (/tmp), need no hiding.
func (l layout) hidden() ([]hiddenPath, error) {
	var out []hiddenPath
	seen := map[string]bool{}
	for _, p := range append([]string{l.StateDir}, l.Hide...) {
		real, err := filepath.EvalSymlinks(p)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("hide %s: %w", p, err)
		}
		if real == "/" || isReserved(real) || seen[real] {
			continue
		}
		seen[real] = true
		info, err := os.Stat(real)
		if err != nil {
			return nil, fmt.Errorf("hide %s: %w", p, err)
		}
		out = append(out, hiddenPath{path: real, dir: info.IsDir()})
	}
	return out, nil
}

// limitArgs is the limits as the limit helper's flags.
func (lim Limits) limitArgs() []string {
	var a []string
	add := func(name string, v, unit uint64) {
		if v > 0 {
			a = append(a, "--"+name, strconv.FormatUint(v*unit, 10))
		}
	}
	add("nofile", lim.OpenFiles, 1)
	add("fsize", lim.FileSizeMB, 1<<20)
	add("cpu", lim.CPUSeconds, 1)
	add("as", lim.AddressSpaceMB, 1<<20)
	add("nproc", lim.Processes, 1)
	return a
}
