package hermes

import (
	"context"
	"strings"
	"testing"

	"github.com/agentenv/agentenv/sdk"
	"github.com/agentenv/agentenv/sdk/sdktest"
	"github.com/agentenv/agentenv/sdk/toolformat"
)

func TestConformance(t *testing.T) {
	sdktest.ToolFormatConformance(t, New(), goldenSamples(t, Name)...)
}

// TestBinary runs the plugin binary as the host does, over go-plugin, and
// reads every golden case through it.
func TestBinary(t *testing.T) {
	bin := sdktest.Build(t, "./cmd/agentenv-toolformat-hermes")
	c := sdktest.Launch(t, sdk.KindToolFormat, bin).(*toolformat.Client)
	ctx := context.Background()
	info, err := c.RemoteInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Name != Name || info.Kind != sdk.KindToolFormat || info.Version != Version || len(info.ConfigSchema) != 0 {
		t.Fatalf("Info over go-plugin = %+v", info)
	}
	cases, sets := goldenCases(t, Name)
	for _, gc := range cases {
		t.Run(gc.Name, func(t *testing.T) {
			got, err := c.Parse(ctx, gc.Reply, sets[gc.Tools])
			if err != nil {
				t.Fatal(err)
			}
			checkGolden(t, got, gc)
		})
	}
}

// A reply of several MiB (the server takes frames up to 16 MiB) crosses
// the plugin boundary both ways: gRPC's 4 MiB default would refuse it.
func TestBinaryLargeReply(t *testing.T) {
	bin := sdktest.Build(t, "./cmd/agentenv-toolformat-hermes")
	c := sdktest.Launch(t, sdk.KindToolFormat, bin).(*toolformat.Client)
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
