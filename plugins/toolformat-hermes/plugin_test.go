package hermes

import (
	"context"
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
