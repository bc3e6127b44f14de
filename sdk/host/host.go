// Package host is what a plugin host needs from the SDK: the plugin sets
// to hand go-plugin, one entry per kind. Dispensing kind K yields K's
// *Client, which implements K's interface and sdk.Remote.
package host

import (
	"fmt"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/agentenv/agentenv/sdk"
	"github.com/agentenv/agentenv/sdk/internal/wire"
	"github.com/agentenv/agentenv/sdk/reward"
	"github.com/agentenv/agentenv/sdk/sandbox"
	"github.com/agentenv/agentenv/sdk/toolformat"
)

// PluginSets returns the host's versioned plugin sets for
// plugin.ClientConfig.VersionedPlugins: each protocol version from the
// oldest any kind still speaks (sdk.MinProtocol) to sdk.ProtocolVersion.
// A host checks the negotiated version against sdk.MinProtocol of the
// plugin's kind before use.
func PluginSets() map[int]plugin.PluginSet {
	sets := map[int]plugin.PluginSet{}
	// Every version some kind still speaks: an older tool-format plugin
	// is dispensed too, so that the host can name it (Info) in its refusal.
	for v := sdk.MinProtocol(sdk.KindSandbox); v <= sdk.ProtocolVersion; v++ {
		sets[v] = plugin.PluginSet{
			string(sdk.KindReward):     &reward.GRPCPlugin{},
			string(sdk.KindToolFormat): &toolformat.GRPCPlugin{Protocol: v},
			string(sdk.KindSandbox):    &sandbox.GRPCPlugin{},
		}
	}
	return sets
}

// DialOptions returns the gRPC options a host must use with plugins
// (plugin.ClientConfig.GRPCDialOptions): messages up to
// sdk.MaxMessageBytes.
func DialOptions() []grpc.DialOption { return wire.DialOptions() }

// CheckProtocol refuses a plugin of kind whose process negotiated a
// protocol older than the kind needs (sdk.MinProtocol), naming it from its
// Info and saying what to do.
func CheckProtocol(kind sdk.Kind, negotiated int, info sdk.Info) error {
	need := sdk.MinProtocol(kind)
	if negotiated >= need {
		return nil
	}
	version := info.Version
	if version == "" {
		version = "unversioned"
	}
	return fmt.Errorf("%s plugin %q (version %s) speaks plugin protocol %d, and this agentenv needs protocol %d for %s plugins "+
		"(%s): rebuild the plugin against the current agentenv sdk/ (the sdk/ folder of this agentenv's release; see docs/plugins.md, Versions)",
		kind, info.Name, version, negotiated, need, kind, whatChanged[need])
}

// whatChanged says, per protocol version, what a plugin built before it lacks.
var whatChanged = map[int]string{
	3: "protocol 3 sends a turn's tools once, not with every parse",
}
