package hermes

import (
	"context"
	"strings"
	"testing"

	"github.com/agentenv/agentenv/plugins/toolformattest"
	"github.com/agentenv/agentenv/sdk/sdktest"
)

const cmdPkg = "./cmd/agentenv-toolformat-hermes"

func TestConformance(t *testing.T) {
	sdktest.ToolFormatConformance(t, New(), toolformattest.Samples(t, Name)...)
}

// TestBinary runs the plugin binary as the host does, over go-plugin, and
// reads every golden case through it.
func TestBinary(t *testing.T) {
	toolformattest.Binary(t, cmdPkg, Name, Version)
}

// A reply of several MiB (the server takes frames up to 16 MiB) crosses
// the plugin boundary both ways: gRPC's 4 MiB default would refuse it.
func TestBinaryLargeReply(t *testing.T) {
	c := toolformattest.LaunchBinary(t, cmdPkg)
	text := strings.Repeat("thinking aloud. ", 6<<20/16) +
		`<tool_call>{"name": "echo", "arguments": {"text": "` + strings.Repeat("x", 5<<20) + `"}}</tool_call>`
	got, err := c.Parse(context.Background(), text, nil)
	if err != nil {
		t.Fatalf("Parse of a %d MiB reply: %v", len(text)>>20, err)
	}
	if len(got.Calls) != 1 || got.Calls[0].Name != "echo" || len(got.Calls[0].Arguments) < 5<<20 || len(got.Content) < 6<<20 {
		t.Fatalf("Parse of a %d MiB reply read %d calls, content %d bytes", len(text)>>20, len(got.Calls), len(got.Content))
	}
}
