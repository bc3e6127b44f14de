// Command misbehave is a family of broken reward plugins for the host's
// tests. It is installed under several names, agentenv-reward-<how>, and
// misbehaves as its name says:
//
//	badcookie   serves with the wrong handshake cookie
//	badversion  serves only protocol version 99
//	oldversion  serves only protocol version 1 (an SDK before sandbox contract v2)
//	crash       dies before the handshake
//	badschema   serves, but its config schema is not a valid JSON Schema
//	wrongkind   answers Info as a toolformat plugin
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	goplugin "github.com/hashicorp/go-plugin"

	"github.com/agentenv/agentenv/sdk"
	"github.com/agentenv/agentenv/sdk/reward"
)

type plugin struct {
	name   string
	kind   sdk.Kind
	schema json.RawMessage
}

func (p plugin) Info() sdk.Info {
	return sdk.Info{Name: p.name, Kind: p.kind, Version: "v1", ConfigSchema: p.schema}
}

func (plugin) Combine(context.Context, map[string]float64) (float64, error) { return 1, nil }

func serve(hs goplugin.HandshakeConfig, version int, p plugin) {
	goplugin.Serve(&goplugin.ServeConfig{
		HandshakeConfig: hs,
		VersionedPlugins: map[int]goplugin.PluginSet{
			version: {string(sdk.KindReward): &reward.GRPCPlugin{Impl: p}},
		},
		GRPCServer: goplugin.DefaultGRPCServer,
	})
}

func main() {
	how := strings.TrimPrefix(filepath.Base(os.Args[0]), "agentenv-reward-")
	p := plugin{name: how, kind: sdk.KindReward}
	switch how {
	case "badcookie":
		hs := sdk.Handshake
		hs.MagicCookieValue = "not-the-agentenv-cookie"
		serve(hs, sdk.ProtocolVersion, p)
	case "badversion":
		serve(sdk.Handshake, 99, p)
	case "oldversion": // a plugin built against the SDK before contract v2
		hs := sdk.Handshake
		hs.ProtocolVersion = 1
		serve(hs, 1, p)
	case "crash":
		fmt.Fprintln(os.Stderr, "fatal: cannot load the reward model")
		os.Exit(3)
	case "badschema":
		p.schema = json.RawMessage(`{"type": 12}`)
		serve(sdk.Handshake, sdk.ProtocolVersion, p)
	case "wrongkind":
		p.kind = sdk.KindToolFormat
		serve(sdk.Handshake, sdk.ProtocolVersion, p)
	default:
		fmt.Fprintf(os.Stderr, "misbehave: unknown behaviour %q\n", how)
		os.Exit(2)
	}
}
