package main

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/agentenv/agentenv/sdk/sdktest"
)

// The verl and TRL integrations (integrations/verl, integrations/trl, on
// integrations/episode) against this build: each pytest suite starts
// `agentenv serve` of GridSim itself, stops and restarts it mid-episode, and
// drives the agent loop or rollout function through stand-ins of verl's and
// TRL's classes, whose signatures a test checks against the record taken
// from the trainers' source. They run under a python3 with Debian's
// python3-pytest, python3-websockets and python3-yaml (.ci/run installs them
// for /usr/bin/python3).
func TestTrainerIntegrationsPytest(t *testing.T) {
	py := pythonWithWebsockets()
	if py != "" && exec.Command(py, "-c", "import pytest, yaml").Run() != nil {
		py = ""
	}
	if py == "" {
		sdktest.Missing(t, "python3 with pytest, websockets and yaml (the verl and TRL integration suites)",
			"no python3 imports them", "apt-get install python3-pytest python3-websockets python3-yaml")
	}
	for _, suite := range []string{"integrations/verl/tests", "integrations/trl/tests"} {
		t.Run(strings.Split(suite, "/")[1], func(t *testing.T) {
			cmd := exec.Command(py, "-m", "pytest", "-q", "-rxXs", "-p", "no:cacheprovider", suite)
			cmd.Dir = "../.."
			cmd.Env = append(os.Environ(), "AGENTENV_BIN="+agentenv(t), "PYTHONDONTWRITEBYTECODE=1",
				"NO_PROXY=127.0.0.1", "no_proxy=127.0.0.1")
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("pytest %s: %v\n%s", suite, err, out)
			}
			// pytest exits 0 only when every test passed; still check it
			// ran some and skipped none but the Qwen3 prompt test for want
			// of node, which only CI must have (it fails there instead).
			summary := regexp.MustCompile(`(?m)^=* ?(\d+) passed.*$`).FindString(string(out))
			if summary == "" {
				t.Fatalf("pytest %s ran no test:\n%s", suite, out)
			}
			for _, s := range regexp.MustCompile(`(?m)^SKIPPED .*$`).FindAllString(string(out), -1) {
				if !strings.Contains(s, "no Qwen3 tokenizer oracle") {
					t.Fatalf("pytest %s skipped a test:\n%s", suite, out)
				}
				sdktest.MissingPart(t, "node and npm (the Qwen3 prompt tests of "+suite+")", s, "apt-get install nodejs npm")
			}
			t.Log(strings.TrimSpace(summary))
		})
	}
}
