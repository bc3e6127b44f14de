package sdk

import (
	"context"
	"encoding/json"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc/codes"
)

// ProtocolVersion is the wire protocol this SDK speaks. It changes only
// for breaking wire changes; features are negotiated through Info.
// Protocol 2 (sandbox contract v2): Terminate and Exec take the handle
// Deploy returned, and sandboxes have Prepare.
// Protocol 3: tool-format plugins hold a turn's tools, registered once
// (RegisterTools), and each Parse names them by id. Sandbox and reward
// plugins speak 2 and 3 alike.
const ProtocolVersion = 3

// MinProtocol is the oldest protocol a host takes from a plugin of kind:
// 3 for tool formats (a protocol 2 tool format expects every tool with
// every parse), 2 for the rest.
func MinProtocol(kind Kind) int {
	if kind == KindToolFormat {
		return 3
	}
	return 2
}

// Protocols lists the protocol versions a plugin of kind built with this
// SDK serves, oldest first: every version from MinProtocol(kind) up.
func Protocols(kind Kind) []int {
	var out []int
	for v := MinProtocol(kind); v <= ProtocolVersion; v++ {
		out = append(out, v)
	}
	return out
}

// Handshake is shared by the host and every plugin. The cookie is not a
// secret: it only stops a user from running a plugin binary by hand.
var Handshake = plugin.HandshakeConfig{
	ProtocolVersion:  ProtocolVersion,
	MagicCookieKey:   "AGENTENV_PLUGIN_MAGIC_COOKIE",
	MagicCookieValue: "6f0b3c1e-agentenv-plugin",
}

// MaxMessageBytes bounds one message between the host and a plugin, both
// ways. gRPC's default (4 MiB) is below what a server accepts as one model
// reply (16 MiB), so both sides raise it.
const MaxMessageBytes = 64 << 20

// Remote is what the host can ask of any plugin it dispensed, besides the
// calls of the plugin's kind.
type Remote interface {
	RemoteInfo(ctx context.Context) (Info, error)
	Configure(ctx context.Context, config json.RawMessage) error
}

// PluginError is an error a plugin returned, as the host sees it: the
// plugin's own message, with the gRPC code kept for callers that need to
// tell a crashed plugin (codes.Unavailable) from a refused call.
type PluginError struct {
	Code    codes.Code
	Message string
}

func (e *PluginError) Error() string { return e.Message }

// Unavailable reports whether the plugin process could not be reached
// (crashed, killed, or shutting down) rather than refusing the call.
func (e *PluginError) Unavailable() bool {
	return e.Code == codes.Unavailable
}
