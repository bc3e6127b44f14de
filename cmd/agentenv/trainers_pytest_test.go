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
			// ran some and skipped none.
			summary := regexp.MustCompile(`(?m)^=* ?(\d+) passed.*$`).FindString(string(out))
			if summary == "" || strings.Contains(summary, "skipped") {
				t.Fatalf("pytest %s ran no test or skipped some:\n%s", suite, out)
			}
			t.Log(strings.TrimSpace(summary))
		})
	}
}
