package sandbox

import (
	"debug/elf"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// TerminalBinaryName is the file name of agentenv's terminal server, the
// binary a sandbox injects for Spec.Terminal.
const TerminalBinaryName = "agentenv-terminal"

// Variables FindTerminalBinary reads.
const (
	// EnvTerminalBinary names the terminal binary to use, overriding the
	// search.
	EnvTerminalBinary = "AGENTENV_TERMINAL_BINARY"
	// EnvPluginPath is the host's plugin search path (colon-separated).
	EnvPluginPath = "AGENTENV_PLUGIN_PATH"
	// EnvWorkdir is set in the terminal server's environment to
	// Spec.Terminal.Workdir (or the image's WORKDIR): where the model's
	// commands run.
	EnvWorkdir = "AGENTENV_WORKDIR"
)

// TerminalMountPath is where sandboxes put the injected binary inside the
// container.
const TerminalMountPath = "/.agentenv/agentenv-terminal"

// howToBuildTerminal ends every error about a missing or unusable binary.
const howToBuildTerminal = "build it with `make build` in agentenv's source tree (it writes bin/agentenv-terminal beside bin/agentenv), " +
	"or `CGO_ENABLED=0 go build -o bin/agentenv-terminal ./cmd/agentenv-terminal`, or name one with $" + EnvTerminalBinary

// FindTerminalBinary finds agentenv's terminal server for a sandbox to
// inject, and returns its absolute path with links resolved (as a bind
// mount needs it): $AGENTENV_TERMINAL_BINARY when set, else the first
// agentenv-terminal found next to this process's executable, in the folders
// of $AGENTENV_PLUGIN_PATH, then in ~/.agentenv/plugins. The first one
// found is the one used: it must be a static ELF executable for this
// machine's architecture (no dynamic loader: the container may have no
// libc), else the error says how to build one.
func FindTerminalBinary() (string, error) {
	exe, _ := os.Executable()
	home, _ := os.UserHomeDir()
	return findTerminalBinary(os.Getenv(EnvTerminalBinary), exe, os.Getenv(EnvPluginPath), home)
}

func findTerminalBinary(override, exe, pluginPath, home string) (string, error) {
	if override != "" {
		p, err := resolveTerminalBinary(override)
		if err != nil {
			return "", fmt.Errorf("$%s: %w", EnvTerminalBinary, err)
		}
		return p, nil
	}
	var dirs []string
	if exe != "" {
		dirs = append(dirs, filepath.Dir(exe))
	}
	for _, d := range filepath.SplitList(pluginPath) {
		if d != "" {
			dirs = append(dirs, d)
		}
	}
	if home != "" {
		dirs = append(dirs, filepath.Join(home, ".agentenv", "plugins"))
	}
	for _, d := range dirs {
		p := filepath.Join(d, TerminalBinaryName)
		if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		return resolveTerminalBinary(p)
	}
	return "", fmt.Errorf("no %s found (looked in %s): %s", TerminalBinaryName, strings.Join(dirs, ", "), howToBuildTerminal)
}

// resolveTerminalBinary checks the binary at p and returns its absolute
// path, links resolved.
func resolveTerminalBinary(p string) (string, error) {
	if err := CheckTerminalBinary(p); err != nil {
		return "", err
	}
	abs, err := filepath.Abs(p)
	if err == nil {
		abs, err = filepath.EvalSymlinks(abs)
	}
	if err != nil {
		return "", fmt.Errorf("terminal binary %s: %w", p, err)
	}
	return abs, nil
}

// elfMachines is the ELF machine of each architecture agentenv runs on.
var elfMachines = map[string]elf.Machine{
	"amd64":   elf.EM_X86_64,
	"arm64":   elf.EM_AARCH64,
	"386":     elf.EM_386,
	"arm":     elf.EM_ARM,
	"riscv64": elf.EM_RISCV,
	"ppc64le": elf.EM_PPC64,
	"s390x":   elf.EM_S390,
}

// CheckTerminalBinary checks that path is an executable, statically linked
// ELF file for this machine's architecture, as a container with no libc
// can run.
func CheckTerminalBinary(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("terminal binary %s: %w; %s", path, err, howToBuildTerminal)
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("terminal binary %s is not an executable file; %s", path, howToBuildTerminal)
	}
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("terminal binary %s is not an ELF executable (%v); %s", path, err, howToBuildTerminal)
	}
	defer f.Close()
	if f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return fmt.Errorf("terminal binary %s is an ELF %s, not an executable; %s", path, f.Type, howToBuildTerminal)
	}
	if want, ok := elfMachines[runtime.GOARCH]; ok && f.Machine != want {
		return fmt.Errorf("terminal binary %s is built for %s, not this machine's %s; %s", path, f.Machine, runtime.GOARCH, howToBuildTerminal)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("terminal binary %s is dynamically linked (it needs a loader the container may lack); %s", path, howToBuildTerminal)
		}
	}
	return nil
}
