package hermes

import (
	"os/exec"
	"testing"

	"github.com/agentenv/agentenv/plugins/toolformattest"

	"github.com/agentenv/agentenv/sdk/sdktest"
)

// TestGoldenMatchesVLLMModel runs the model of vLLM's parsers over the
// golden vectors (both formats): every case without a "vllm" entry must be
// what vLLM returns, and every "vllm" entry must be right.
func TestGoldenMatchesVLLMModel(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		sdktest.Missing(t, "python3 (it checks the golden vectors against the vLLM model)", err.Error(), "apt-get install python3")
	}
	out, err := exec.Command(py, "../testdata/toolformat/vllm_oracle.py", toolformattest.GoldenPath).CombinedOutput()
	if err != nil {
		t.Fatalf("vllm_oracle.py: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}
