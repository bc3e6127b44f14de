// Command toolformatv is a test tool-format plugin, installed as
// agentenv-toolformat-<name>. Its Parse reads no calls: it answers what
// the tests check. The reply "pid" is answered with the process id; any
// other with "sets=N tools=a,b", N being how many tool sets this process
// was sent (the SDK hands Parse the registered slice itself, so each
// registration is a new slice) and a,b the tools of this parse.
//
// Installed as agentenv-toolformat-oldproto it serves only protocol 2, as
// a plugin built against the SDK before tool sets did.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	goplugin "github.com/hashicorp/go-plugin"

	"github.com/agentenv/agentenv/sdk"
	"github.com/agentenv/agentenv/sdk/toolformat"
)

type plugin struct {
	name string

	mu   sync.Mutex
	seen map[*toolformat.Tool]bool
}

func (p *plugin) Info() sdk.Info {
	return sdk.Info{Name: p.name, Kind: sdk.KindToolFormat, Version: "v0.9.0"}
}

func (p *plugin) Parse(_ context.Context, text string, tools []toolformat.Tool) (toolformat.Parsed, error) {
	if text == "pid" {
		return toolformat.Parsed{Content: fmt.Sprint(os.Getpid())}, nil
	}
	p.mu.Lock()
	if len(tools) > 0 {
		p.seen[&tools[0]] = true
	}
	n := len(p.seen)
	p.mu.Unlock()
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.Name
	}
	return toolformat.Parsed{Content: fmt.Sprintf("sets=%d tools=%s", n, strings.Join(names, ","))}, nil
}

func main() {
	name := strings.TrimPrefix(filepath.Base(os.Args[0]), "agentenv-toolformat-")
	p := &plugin{name: name, seen: map[*toolformat.Tool]bool{}}
	if name == "oldproto" {
		hs := sdk.Handshake
		hs.ProtocolVersion = 2
		goplugin.Serve(&goplugin.ServeConfig{
			HandshakeConfig:  hs,
			VersionedPlugins: map[int]goplugin.PluginSet{2: {string(sdk.KindToolFormat): &toolformat.GRPCPlugin{Impl: p}}},
			GRPCServer:       goplugin.DefaultGRPCServer,
		})
		return
	}
	toolformat.Serve(p)
}
