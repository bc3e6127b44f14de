package builtin

import "github.com/agentenv/agentenv/sdk"

const modulePrefix = "github.com/agentenv/agentenv/"

// firstParty lists every plugin agentenv's repository provides, sorted by
// kind and name. It is what lets a binary built without one (-tags no_ecs)
// say so, instead of "not found". A plugin added here also registers
// itself (Register, in its package) and gets a build-tagged file in
// cmd/agentenv; cmd/agentenv's tests fail until the three agree.
var firstParty = []FirstParty{
	{Kind: sdk.KindReward, Name: "mean", Tag: "no_mean",
		Package: modulePrefix + "plugins/reward-mean"},
	{Kind: sdk.KindSandbox, Name: "ecs", Tag: "no_ecs",
		Package: modulePrefix + "plugins/sandbox-ecs"},
	{Kind: sdk.KindSandbox, Name: "k8s", Tag: "no_k8s",
		Package: modulePrefix + "plugins/sandbox-k8s"},
	{Kind: sdk.KindSandbox, Name: "local", Tag: "no_local",
		Package: modulePrefix + "plugins/sandbox-local"},
	{Kind: sdk.KindToolFormat, Name: "hermes", Tag: "no_hermes",
		Package: modulePrefix + "plugins/toolformat-hermes"},
	// vLLM's --tool-call-parser spelling; the Go package keeps its old name.
	{Kind: sdk.KindToolFormat, Name: "qwen3_coder", Aliases: []string{"qwen3coder", "qwen3-coder"}, Tag: "no_qwen3_coder",
		Package: modulePrefix + "plugins/toolformat-qwen3coder"},
}
