// Package host is what a plugin host needs from the SDK: the plugin sets
// to hand go-plugin, one entry per kind. Dispensing kind K yields K's
// *Client, which implements K's interface and sdk.Remote.
package host

import (
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/agentenv/agentenv/sdk"
	"github.com/agentenv/agentenv/sdk/internal/wire"
	"github.com/agentenv/agentenv/sdk/reward"
	"github.com/agentenv/agentenv/sdk/sandbox"
	"github.com/agentenv/agentenv/sdk/toolformat"
)

// PluginSets returns the host's versioned plugin sets for
// plugin.ClientConfig.VersionedPlugins.
func PluginSets() map[int]plugin.PluginSet {
	return map[int]plugin.PluginSet{
		sdk.ProtocolVersion: {
			string(sdk.KindReward):     &reward.GRPCPlugin{},
			string(sdk.KindToolFormat): &toolformat.GRPCPlugin{},
			string(sdk.KindSandbox):    &sandbox.GRPCPlugin{},
		},
	}
}

// DialOptions returns the gRPC options a host must use with plugins
// (plugin.ClientConfig.GRPCDialOptions): messages up to
// sdk.MaxMessageBytes.
func DialOptions() []grpc.DialOption { return wire.DialOptions() }
