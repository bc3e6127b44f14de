// Command agentenv-sandbox-bwrap is an agentenv sandbox plugin that runs
// each env under bubblewrap (bwrap): in new PID, IPC, UTS and mount
// namespaces, with the host's root read-only, a private writable work
// folder and /tmp, no capabilities, resource limits, and the env's port on
// loopback (the host's network, or none at all).
//
// It is also the worked example of docs/writing-a-sandbox-plugin.md, and
// imports nothing of agentenv but its SDK (github.com/agentenv/agentenv/sdk).
package main

import (
	"encoding/json"
	"os"
	"sync"

	"github.com/hashicorp/go-hclog"

	"github.com/agentenv/agentenv/sdk"
	"github.com/agentenv/agentenv/sdk/sandbox"
)

// version is the plugin's version; a build can set it with
// -ldflags "-X main.version=0.2.0".
var version = "0.1.0"

// pluginID prefixes errors and names the plugin in the host's log.
const pluginID = "sandbox-bwrap"

func main() {
	// The same binary is the plugin, and the helpers it runs (helpers.go).
	if len(os.Args) > 1 {
		if run, ok := helpers[os.Args[1]]; ok {
			os.Exit(run(os.Args[2:]))
		}
	}
	sandbox.Serve(newPlugin())
}

// plugin is the bwrap sandbox. Its methods are safe for concurrent use.
type plugin struct {
	log hclog.Logger
	exe string // this binary, run as the keeper and the relay

	mu   sync.Mutex
	cfg  Config
	mine map[string]*keeper // sandboxes this process started, by id
	logs sync.Once          // starts the log watcher (deploy.go)

	checked sync.Once
	bwrapOK error // whether bwrap can make a sandbox here
}

var (
	_ sandbox.Plugin   = (*plugin)(nil)
	_ sandbox.Preparer = (*plugin)(nil)
	_ sdk.Configurer   = (*plugin)(nil)
)

func newPlugin() *plugin {
	exe, err := os.Executable()
	if err != nil {
		exe = os.Args[0]
	}
	return &plugin{log: sdk.Logger(), exe: exe, cfg: defaultConfig(), mine: map[string]*keeper{}}
}

// Info describes the plugin: the host lists it as sandbox "bwrap" and
// checks configurations against its schema.
func (p *plugin) Info() sdk.Info {
	return sdk.Info{Name: "bwrap", Kind: sdk.KindSandbox, Version: version, ConfigSchema: json.RawMessage(configSchema)}
}

func (p *plugin) config() Config {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cfg
}
