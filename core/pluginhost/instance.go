package pluginhost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"

	"github.com/agentenv/agentenv/sdk"
	sdkhost "github.com/agentenv/agentenv/sdk/host"
)

// instance is one running plugin process and the calls in flight on it.
type instance struct {
	cand    candidate
	sum     string    // sha256 of the binary when it was started
	stamp   fileStamp // stamp of the binary when it was started
	client  *plugin.Client
	raw     any // the dispensed client: the kind's interface + sdk.Remote
	remote  sdk.Remote
	info    sdk.Info
	schema  *configSchema
	pid     int
	local   bool // runs in the host's process: no client, no pid
	started time.Time
	stderr  *tailBuffer

	mu      sync.Mutex
	refs    int
	closing bool
	drained chan struct{} // closed once closing and refs == 0
}

// acquire counts a call in; it fails once the instance is retiring.
func (in *instance) acquire() bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.closing {
		return false
	}
	in.refs++
	return true
}

func (in *instance) release() {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.refs--
	if in.closing && in.refs == 0 {
		close(in.drained)
	}
}

// retire stops new calls and returns a channel closed when the calls in
// flight have finished.
func (in *instance) retire() <-chan struct{} {
	in.mu.Lock()
	defer in.mu.Unlock()
	if !in.closing {
		in.closing = true
		if in.refs == 0 {
			close(in.drained)
		}
	}
	return in.drained
}

func (in *instance) exited() bool { return !in.local && in.client.Exited() }

// kill stops the process (gracefully first, as go-plugin does) and then
// anything left in its process group.
func (in *instance) kill() {
	if in.local {
		return
	}
	in.client.Kill()
	if in.pid > 0 {
		_ = syscall.Kill(-in.pid, syscall.SIGKILL)
	}
}

// start launches the plugin c and checks it: handshake, dispense, Info
// naming the kind and name the binary's file name promises, and a config
// schema that compiles. The instance is not yet configured. passEnv names
// host variables the plugin's config lets it have. A probe (a start only
// to ask for Info) logs only at debug level: its outcome is the status
// `plugins list` shows.
func (h *Host) start(ctx context.Context, c candidate, passEnv []string, probe bool) (*instance, error) {
	if c.problem != "" {
		return nil, errors.New(c.problem)
	}
	if !probe {
		if in, ok, err := h.startLocal(c); ok {
			return in, err
		}
	}
	sum, stamp, err := h.fp.hash(c.path)
	if err != nil {
		return nil, fmt.Errorf("read binary: %w", err)
	}
	h.starts.Add(1)
	timeout := h.opts.StartTimeout
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < timeout {
		timeout = max(time.Until(dl), time.Millisecond)
	}
	cmd := exec.Command(c.path, c.args...)
	cmd.Env = h.pluginEnv(c.id(), passEnv)
	setProcAttr(cmd)
	tail := &tailBuffer{max: 4096}
	var log hclog.Logger = pluginLogger{h.log.Named(c.id())}
	if probe && !h.log.IsDebug() {
		log = hclog.NewNullLogger() // stderr still reaches tail
	}
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  sdk.Handshake,
		VersionedPlugins: sdkhost.PluginSets(),
		Cmd:              cmd,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		AutoMTLS:         true,
		GRPCDialOptions:  sdkhost.DialOptions(),
		// Not Managed: go-plugin never prunes its list of managed clients,
		// so a crash-looping plugin would grow it forever. The host kills
		// every client itself (Close), and Pdeathsig covers a host that dies.
		SkipHostEnv:  true,
		StartTimeout: timeout,
		Stderr:       tail,
		Logger:       log,
	})
	in := &instance{cand: c, sum: sum, stamp: stamp, client: client, started: time.Now(),
		stderr: tail, drained: make(chan struct{})}
	fail := func(err error) (*instance, error) {
		in.kill()
		return nil, err
	}
	rpc, err := client.Client()
	if cmd.Process != nil {
		in.pid = cmd.Process.Pid
	}
	if err != nil {
		// go-plugin has already killed the process; Kill would only log
		// a misleading "failed to exit gracefully".
		if in.pid > 0 {
			_ = syscall.Kill(-in.pid, syscall.SIGKILL)
			// The process is gone or going; once go-plugin has seen it exit
			// its stderr is fully read, and the last lines explain the failure.
			for deadline := time.Now().Add(2 * time.Second); !client.Exited() && time.Now().Before(deadline); {
				time.Sleep(5 * time.Millisecond)
			}
		}
		return nil, errors.New(describeStartError(err, tail.String(), timeout))
	}
	in.raw, err = rpc.Dispense(string(c.kind))
	if err != nil {
		return fail(fmt.Errorf("dispense %s: %w", c.kind, err))
	}
	remote, ok := in.raw.(sdk.Remote)
	if !ok {
		return fail(fmt.Errorf("the SDK's %s client does not answer Info (a bug in agentenv)", c.kind))
	}
	in.remote = remote
	info, err := remote.RemoteInfo(ctx)
	if err != nil {
		return fail(fmt.Errorf("Info call failed: %w", err))
	}
	if err := c.matches(info); err != nil {
		return fail(err)
	}
	if err := sdkhost.CheckProtocol(c.kind, client.NegotiatedVersion(), info); err != nil {
		return fail(err)
	}
	in.info = info
	if in.schema, err = compileSchema(info.ConfigSchema); err != nil {
		return fail(err)
	}
	return in, nil
}

// matches checks that a plugin's Info names the plugin it was found as
// (its canonical name: aliases are resolved when it is found).
func (c candidate) matches(info sdk.Info) error {
	if info.Kind != c.kind || info.Name != c.name {
		return fmt.Errorf("its Info says it is %s-%s, but it was found as %s", info.Kind, info.Name, c.id())
	}
	return nil
}

// PassEnvKey is the configuration key through which a plugin's config
// names host environment variables the plugin may have, e.g.
// {"pass_env": ["AWS_REGION", "AWS_*"]}. The plugin's schema must accept it.
const PassEnvKey = "pass_env"

// passEnvOf reads the pass_env list of a configuration, if it has one.
func passEnvOf(config json.RawMessage) []string {
	var c map[string]json.RawMessage
	if json.Unmarshal(config, &c) != nil {
		return nil
	}
	var names []string
	if json.Unmarshal(c[PassEnvKey], &names) != nil {
		return nil
	}
	return names
}

// configure validates config against the plugin's schema and sends it.
func (in *instance) configure(ctx context.Context, config json.RawMessage) error {
	if err := in.schema.validate(config); err != nil {
		return err
	}
	if in.schema.s == nil {
		return nil
	}
	if err := in.remote.Configure(ctx, normalizeConfig(config)); err != nil {
		return fmt.Errorf("the plugin refused its config: %w", err)
	}
	return nil
}

// pluginEnv is the whole environment a plugin gets: the allow-listed host
// variables, never the rest (the host may hold cloud credentials).
func (h *Host) pluginEnv(id string, passEnv []string) []string {
	// Where agentenv's own binaries are (a sandbox injects agentenv-terminal
	// into Harbor tasks' containers): paths, no secrets.
	allow := []string{"PATH", "HOME", "TMPDIR", "AGENTENV_TERMINAL_BINARY", PathEnv}
	allow = append(append(append(allow, h.opts.EnvAllow...), h.opts.PluginEnv[id]...), passEnv...)
	var env []string
	for _, kv := range h.environ() {
		k, _, _ := strings.Cut(kv, "=")
		for _, a := range allow {
			if p, ok := strings.CutSuffix(a, "*"); ok && strings.HasPrefix(k, p) || a == k {
				env = append(env, kv)
				break
			}
		}
	}
	// go-plugin reads this in the plugin to place its unix socket.
	env = append(env, "PLUGIN_UNIX_SOCKET_DIR="+h.sockDir)
	if h.log != nil {
		// The SDK's logger sends only what the host will show.
		env = append(env, sdk.EnvLogLevel+"="+h.log.GetLevel().String())
	}
	return env
}

var unrecognized = regexp.MustCompile(`Unrecognized remote plugin message: ([^\n]*)`)

// describeStartError turns go-plugin's start errors into one line saying
// what is wrong with the binary.
func describeStartError(err error, stderr string, timeout time.Duration) string {
	msg := err.Error()
	last := lastLine(stderr)
	out := ""
	if m := unrecognized.FindStringSubmatch(msg); m != nil {
		out = strings.TrimSpace(m[1])
	}
	switch {
	case strings.Contains(stderr, "This binary is a plugin. These are not meant to be executed directly"):
		return "handshake cookie mismatch: the plugin expects a different magic cookie (built for another host, or an incompatible agentenv SDK)"
	case out != "":
		return fmt.Sprintf("not an agentenv plugin: it printed %q on stdout instead of the plugin handshake", out)
	case strings.Contains(msg, "incompatible API version"):
		return protocolMismatch(strings.TrimPrefix(msg, "incompatible API version with plugin. "))
	case strings.Contains(msg, "incompatible core API version"):
		return "not an agentenv plugin: " + msg
	case unrecognized.MatchString(msg), strings.Contains(msg, "plugin exited before we could connect"):
		return "exited before the plugin handshake" + withOutput(last)
	case strings.Contains(msg, "timeout while waiting for plugin to start"):
		return fmt.Sprintf("no plugin handshake within %s", timeout) + withOutput(last)
	}
	return oneLine(msg)
}

func withOutput(line string) string {
	if line == "" {
		return ""
	}
	return fmt.Sprintf(" (last stderr line: %q)", line)
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// tailBuffer keeps the last max bytes written to it: a plugin's stderr,
// quoted in start errors.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// pluginLogger is the logger go-plugin re-logs a plugin's stderr lines
// to. It stops go-plugin from naming it after the binary (every built-in
// is "agentenv"): the host names it after the plugin. Of the pairs
// go-plugin adds to a JSON line, it drops "timestamp" (the plugin's own
// clock; the host's line has one already) and turns "@module" (a plugin
// logger made with Named) into a name below the plugin's.
type pluginLogger struct{ hclog.Logger }

func (l pluginLogger) Named(string) hclog.Logger { return l }

func (l pluginLogger) Trace(msg string, args ...any) { l.Log(hclog.Trace, msg, args...) }
func (l pluginLogger) Debug(msg string, args ...any) { l.Log(hclog.Debug, msg, args...) }
func (l pluginLogger) Info(msg string, args ...any)  { l.Log(hclog.Info, msg, args...) }
func (l pluginLogger) Warn(msg string, args ...any)  { l.Log(hclog.Warn, msg, args...) }
func (l pluginLogger) Error(msg string, args ...any) { l.Log(hclog.Error, msg, args...) }

func (l pluginLogger) Log(level hclog.Level, msg string, args ...any) {
	log := l.Logger
	kept := make([]any, 0, len(args))
	for i := 0; i < len(args); i += 2 {
		if i+1 == len(args) {
			kept = append(kept, args[i])
			break
		}
		switch args[i] {
		case "timestamp":
			continue
		case "@module":
			if name, ok := args[i+1].(string); ok && name != "" {
				log = log.Named(name)
			}
			continue
		}
		kept = append(kept, args[i], args[i+1])
	}
	log.Log(level, msg, kept...)
}

var (
	pluginVersion  = regexp.MustCompile(`Plugin version: (\d+)`)
	clientVersions = regexp.MustCompile(`Client versions: \[([\d ]*)\]`)
)

// protocolMismatch words go-plugin's version error for the user: which
// side is older, and what to do.
func protocolMismatch(detail string) string {
	// go-plugin lists the host's versions in map order: sort them.
	detail = clientVersions.ReplaceAllStringFunc(detail, func(m string) string {
		vs := strings.Fields(clientVersions.FindStringSubmatch(m)[1])
		slices.SortFunc(vs, func(a, b string) int { x, _ := strconv.Atoi(a); y, _ := strconv.Atoi(b); return x - y })
		return "Client versions: [" + strings.Join(vs, " ") + "]"
	})
	msg := "no common protocol version: " + detail
	m := pluginVersion.FindStringSubmatch(detail)
	if m == nil {
		return msg
	}
	v, _ := strconv.Atoi(m[1])
	switch {
	case v < sdk.ProtocolVersion:
		return fmt.Sprintf("%s; the plugin was built against an older agentenv SDK (protocol %d): rebuild it against this agentenv's sdk/ (protocol %d; see docs/plugins.md for what changed)", msg, v, sdk.ProtocolVersion)
	case v > sdk.ProtocolVersion:
		return fmt.Sprintf("%s; the plugin was built against a newer agentenv SDK (protocol %d): upgrade agentenv, or rebuild the plugin against this one's sdk/ (protocol %d)", msg, v, sdk.ProtocolVersion)
	}
	return msg
}
