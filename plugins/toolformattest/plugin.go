package toolformattest

import (
	"context"
	"testing"

	"github.com/agentenv/agentenv/sdk"
	"github.com/agentenv/agentenv/sdk/sdktest"
	"github.com/agentenv/agentenv/sdk/toolformat"
)

// LaunchBinary builds the plugin binary at cmdPkg (e.g.
// "./cmd/agentenv-toolformat-hermes") and starts it as the host does, over
// go-plugin; the test stops it.
func LaunchBinary(t testing.TB, cmdPkg string) *toolformat.Client {
	t.Helper()
	bin := sdktest.Build(t, cmdPkg)
	return sdktest.Launch(t, sdk.KindToolFormat, bin).(*toolformat.Client)
}

// Binary runs the plugin binary at cmdPkg, checks its Info (name, kind,
// version, no config) and reads every golden case for name through it.
func Binary(t *testing.T, cmdPkg, name, version string) {
	c := LaunchBinary(t, cmdPkg)
	ctx := context.Background()
	info, err := c.RemoteInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Name != name || info.Kind != sdk.KindToolFormat || info.Version != version || len(info.ConfigSchema) != 0 {
		t.Fatalf("Info over go-plugin = %+v", info)
	}
	cases, sets := Cases(t, name)
	for _, gc := range cases {
		t.Run(gc.Name, func(t *testing.T) {
			got, err := c.Parse(ctx, gc.Reply, sets[gc.Tools])
			if err != nil {
				t.Fatal(err)
			}
			// Over the wire an unparsed entry's text is cut to about 1 KiB.
			sent := make([]toolformat.Unparsed, len(gc.Unparsed))
			for i, u := range gc.Unparsed {
				sent[i] = toolformat.Sent(u)
			}
			gc.Unparsed = sent
			Check(t, got, gc)
		})
	}
}
