// Package sdktest lets plugin authors test their plugins the way the host
// uses them: through real gRPC, in-process (the harness) or as a real
// subprocess (Launch), and against the conformance suite of their kind.
package sdktest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"

	"github.com/agentenv/agentenv/sdk"
	"github.com/agentenv/agentenv/sdk/host"
	"github.com/agentenv/agentenv/sdk/reward"
	"github.com/agentenv/agentenv/sdk/sandbox"
	"github.com/agentenv/agentenv/sdk/toolformat"
)

// dispense serves p over an in-process gRPC connection and returns the
// host-side client for kind. When the test ends, impl's Cleanup runs if it
// is an sdk.Cleaner, after the connection closes, as Serve runs it after
// the host's stop; its error fails the test.
func dispense(t testing.TB, kind sdk.Kind, p plugin.Plugin, impl any) any {
	t.Helper()
	client, _ := plugin.TestPluginGRPCConn(t, false, map[string]plugin.Plugin{string(kind): p})
	t.Cleanup(func() {
		_ = client.Close()
		if c, ok := impl.(sdk.Cleaner); ok {
			if err := c.Cleanup(); err != nil {
				t.Errorf("%s plugin's Cleanup: %v", kind, err)
			}
		}
	})
	raw, err := client.Dispense(string(kind))
	if err != nil {
		t.Fatalf("dispense %s plugin: %v", kind, err)
	}
	return raw
}

// Reward serves p in-process over real gRPC and returns the host's client
// (and runs p's Cleanup, if it has one, when the test ends).
func Reward(t testing.TB, p reward.Plugin) *reward.Client {
	t.Helper()
	return dispense(t, sdk.KindReward, &reward.GRPCPlugin{Impl: p}, p).(*reward.Client)
}

// ToolFormat serves p in-process over real gRPC and returns the host's
// client (and runs p's Cleanup, if it has one, when the test ends).
func ToolFormat(t testing.TB, p toolformat.Plugin) *toolformat.Client {
	t.Helper()
	return dispense(t, sdk.KindToolFormat, &toolformat.GRPCPlugin{Impl: p}, p).(*toolformat.Client)
}

// Sandbox serves p in-process over real gRPC and returns the host's client
// (and runs p's Cleanup, if it has one, when the test ends).
func Sandbox(t testing.TB, p sandbox.Plugin) *sandbox.Client {
	t.Helper()
	return dispense(t, sdk.KindSandbox, &sandbox.GRPCPlugin{Impl: p}, p).(*sandbox.Client)
}

// Build compiles the main package pkg (an import path or a directory, as
// `go build` takes it) into a temp dir and returns the binary's path.
func Build(t testing.TB, pkg string, extraArgs ...string) string {
	t.Helper()
	name := filepath.Base(pkg)
	if abs, err := filepath.Abs(pkg); err == nil && (name == "." || name == "..") {
		name = filepath.Base(abs) // Build(t, ".") from the plugin's own folder
	}
	out := filepath.Join(t.TempDir(), name)
	args := append([]string{"build", "-o", out}, extraArgs...)
	args = append(args, pkg)
	cmd := exec.Command("go", args...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
	return out
}

// Launch starts the plugin binary at path as a real subprocess, the way
// the host does (gRPC only, AutoMTLS), and returns the dispensed client
// for kind: a *reward.Client, *toolformat.Client or *sandbox.Client. The
// process is killed when the test ends.
func Launch(t testing.TB, kind sdk.Kind, path string, args ...string) any {
	t.Helper()
	cmd := exec.Command(path, args...)
	// The plugin's unix socket goes in a folder the test removes, so a
	// plugin killed by a test leaves nothing behind.
	cmd.Env = append(os.Environ(), "PLUGIN_UNIX_SOCKET_DIR="+t.TempDir())
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  sdk.Handshake,
		VersionedPlugins: host.PluginSets(),
		Cmd:              cmd,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		AutoMTLS:         true,
		GRPCDialOptions:  host.DialOptions(),
		Logger: hclog.New(&hclog.LoggerOptions{
			Name: filepath.Base(path), Output: os.Stderr, Level: hclog.Warn,
		}),
	})
	t.Cleanup(client.Kill)
	rpc, err := client.Client()
	if err != nil {
		t.Fatalf("start plugin %s: %v", path, err)
	}
	raw, err := rpc.Dispense(string(kind))
	if err != nil {
		t.Fatalf("dispense %s from %s: %v", kind, path, err)
	}
	if r, ok := raw.(sdk.Remote); ok {
		info, err := r.RemoteInfo(context.Background())
		if err != nil {
			t.Fatalf("plugin %s does not answer Info: %v", path, err)
		}
		if err := host.CheckProtocol(kind, client.NegotiatedVersion(), info); err != nil {
			t.Fatalf("plugin %s: %v", path, err)
		}
	}
	return raw
}
