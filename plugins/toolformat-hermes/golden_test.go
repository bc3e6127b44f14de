package hermes

import (
	"testing"

	"github.com/agentenv/agentenv/plugins/toolformattest"
	"github.com/agentenv/agentenv/sdk/toolformat"
)

// newParser is a fresh parser, as the shared harness asks for one.
func newParser() toolformat.Parser { return New() }

// TestGolden reads every golden vector for this format
// (toolformattest.GoldenPath) and compares it with the expectation.
func TestGolden(t *testing.T) {
	toolformattest.Golden(t, Name, newParser)
}
