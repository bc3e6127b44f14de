package main

import (
	"sort"

	mean "github.com/agentenv/agentenv/plugins/reward-mean"
	local "github.com/agentenv/agentenv/plugins/sandbox-local"
	hermes "github.com/agentenv/agentenv/plugins/toolformat-hermes"
	qwen3coder "github.com/agentenv/agentenv/plugins/toolformat-qwen3coder"
	"github.com/agentenv/agentenv/sdk/reward"
	"github.com/agentenv/agentenv/sdk/sandbox"
	"github.com/agentenv/agentenv/sdk/toolformat"
)

// builtins are the first-party plugins compiled into agentenv, by
// "<kind>-<name>". Each entry is the plugin binary's whole main: the host
// runs it as `agentenv plugin-serve <kind>-<name>`, a separate process like
// any other plugin, so one `go build` gives a working install.
var builtins = map[string]func(){
	"reward-mean":           func() { reward.Serve(mean.New()) },
	"sandbox-local":         func() { sandbox.Serve(local.New()) },
	"toolformat-hermes":     func() { toolformat.Serve(hermes.New()) },
	"toolformat-qwen3coder": func() { toolformat.Serve(qwen3coder.New()) },
}

// builtinNames lists the built-in plugins, sorted.
func builtinNames() []string {
	names := make([]string, 0, len(builtins))
	for n := range builtins {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
