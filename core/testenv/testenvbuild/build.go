// Package testenvbuild builds the testenv binary for tests and finds its
// processes, so suites can assert that no env outlives them.
package testenvbuild

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
)

// Build compiles the testenv command into dir and returns the binary's
// absolute path.
func Build(dir string) (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", fmt.Errorf("testenvbuild: cannot locate the testenv sources")
	}
	src := filepath.Dir(filepath.Dir(file))
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	out := filepath.Join(abs, "testenv")
	cmd := exec.Command("go", "build", "-o", out, ".")
	cmd.Dir = src
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("testenvbuild: go build in %s: %w\n%s", src, err, msg)
	}
	return out, nil
}

// BuildCommands compiles each main package of cmds (output name → source
// folder, relative to the caller's package) into dir, for tests that run
// plugins as real subprocesses. It returns the outputs' paths by name.
func BuildCommands(dir string, cmds map[string]string) (map[string]string, error) {
	out := make(map[string]string, len(cmds))
	for name, src := range cmds {
		bin := filepath.Join(dir, name)
		cmd := exec.Command("go", "build", "-o", bin, ".")
		cmd.Dir = src
		if msg, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("testenvbuild: building %s in %s: %w\n%s", name, src, err, msg)
		}
		out[name] = bin
	}
	return out, nil
}

// WriteBundle writes a one-task bundle into dir whose env is the test env
// bin (env.toml: its command, then envTOML, e.g. an [env] table): deploy
// it, load a puzzle, one prompt, graded by the env's grade tool.
func WriteBundle(dir, bin, envTOML string) error {
	files := map[string]string{
		"README.md":             "A test bundle on the test env.\n",
		"envs/testenv/env.toml": fmt.Sprintf("command = [%q]\n%s", bin, envTOML),
		"tasks/puzzle.json": `[
  {"id": "env", "type": "deploy_env", "env": "testenv"},
  {"id": "load", "type": "call_tool", "tool": "load_puzzle", "arguments": {"target": 5, "start": 2}},
  {"id": "play", "type": "prompt_agent", "prompt": "Reach the target."},
  {"id": "grade", "type": "verify_tool", "tool": "grade"}
]
`,
	}
	for path, content := range files {
		full := filepath.Join(dir, path)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// Procs returns the pids of live (non-zombie) processes whose command line
// starts with bin, the binary's absolute path.
func Procs(bin string) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		arg0, _, _ := bytes.Cut(cmdline, []byte{0})
		if string(arg0) != bin {
			continue
		}
		if stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil {
			if i := bytes.LastIndexByte(stat, ')'); i > 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
				continue
			}
		}
		pids = append(pids, pid)
	}
	return pids
}
