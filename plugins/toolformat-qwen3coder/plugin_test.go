package qwen3coder

import (
	"testing"

	"github.com/agentenv/agentenv/plugins/toolformattest"
	"github.com/agentenv/agentenv/sdk/sdktest"
)

const cmdPkg = "./cmd/agentenv-toolformat-qwen3_coder"

func TestConformance(t *testing.T) {
	sdktest.ToolFormatConformance(t, New(), toolformattest.Samples(t, Name)...)
}

// TestBinary runs the plugin binary as the host does, over go-plugin, and
// reads every golden case through it.
func TestBinary(t *testing.T) {
	toolformattest.Binary(t, cmdPkg, Name, Version)
}
