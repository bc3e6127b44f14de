// Package pluginhost finds, launches, watches and hot-swaps agentenv
// plugins: sandbox, tool-format and reward plugins running as go-plugin
// gRPC subprocesses. Callers get plain sdk interfaces (reward.Combiner,
// toolformat.Parser, sandbox.Driver) whose calls the host routes to the
// plugin's current process, across crashes, restarts and hot swaps.
package pluginhost

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/agentenv/agentenv/core/firstparty"
	"github.com/agentenv/agentenv/sdk"
	"github.com/agentenv/agentenv/sdk/builtin"
	"github.com/agentenv/agentenv/sdk/reward"
	"github.com/agentenv/agentenv/sdk/sandbox"
	"github.com/agentenv/agentenv/sdk/toolformat"
)

var (
	// ErrNotFound: no plugin of that kind and name was found.
	ErrNotFound = errors.New("plugin not found")
	// ErrClosed: the host was closed.
	ErrClosed = errors.New("plugin host closed")
)

// Options configure a Host. The zero value is usable.
type Options struct {
	Logger hclog.Logger // nil = hclog.Default()
	// SelfExe is the agentenv binary that serves the built-in plugins
	// ("" = os.Executable()).
	SelfExe string
	// SearchPath is the folders searched for plugin binaries, first match
	// wins (nil = DefaultSearchPath(SelfExe)).
	SearchPath []string
	// EnvAllow names the host environment variables every plugin gets,
	// besides PATH, HOME and TMPDIR. A trailing * matches a prefix.
	EnvAllow []string
	// PluginEnv adds variables for one plugin, keyed by "<kind>-<name>",
	// e.g. {"sandbox-ecs": {"AWS_*"}}. A plugin's config may add more in
	// its "pass_env" list (see PassEnvKey).
	PluginEnv map[string][]string
	// Builtins are the plugins SelfExe serves with `plugin-serve`, by
	// <kind>-<name> (nil = every plugin registered with sdk/builtin in this
	// process: what the binary links; a program whose SelfExe is another
	// binary says what that one serves).
	Builtins []string
	// CachePath is the fingerprint cache file ("" = DefaultCachePath(),
	// "-" = keep it in memory only).
	CachePath string
	// StartTimeout bounds a plugin's start and handshake (0 = 20s).
	StartTimeout time.Duration
	// DrainTimeout bounds how long a swapped-out process may finish its
	// calls before it is killed (0 = 30s).
	DrainTimeout time.Duration
	// PollInterval is how often running plugins are checked for a crash
	// and their binaries for a change (0 = 500ms, negative = never).
	PollInterval time.Duration
	// ReloadOnSIGHUP makes SIGHUP call Reload.
	ReloadOnSIGHUP bool
	// IsolateToolFormats runs the built-in tool formats as plugin-serve
	// subprocesses, as plugin binaries run. By default a built-in tool
	// format this process links runs in the host's own process: a parse
	// is a pure function of the reply, and the gRPC round trip to a
	// subprocess was most of a step's overhead (docs/performance.md).
	IsolateToolFormats bool
}

// Entry is one plugin as `agentenv plugins list` shows it.
type Entry struct {
	Name string   `json:"name"` // e.g. "mean"
	Kind sdk.Kind `json:"kind"`
	// Aliases are other names that resolve to this plugin (CanonicalName).
	Aliases []string `json:"aliases,omitempty"`
	Version string   `json:"version"`
	// Source is "built-in" or the binary's path.
	Source string `json:"source"`
	// Command is what the host runs for it: the binary and its arguments.
	Command []string `json:"command"`
	SHA256  string   `json:"sha256"`
	// Status is "ok" or "failed: <why>".
	Status string   `json:"status"`
	Info   sdk.Info `json:"info"`
	// PIDs are the processes serving this plugin in this host now.
	PIDs []int `json:"pids,omitempty"`
	// InProcess is true when this host runs the plugin in its own process
	// now (a built-in tool format; Options.IsolateToolFormats).
	InProcess bool `json:"in_process,omitempty"`
}

// ID is the plugin's full name, <kind>-<name>.
func (e Entry) ID() string { return string(e.Kind) + "-" + e.Name }

// OK reports whether the plugin started and answered Info.
func (e Entry) OK() bool { return e.Status == "ok" }

// Host runs plugins. It is safe for concurrent use.
type Host struct {
	opts       Options
	log        hclog.Logger
	selfExe    string
	selfIsUs   bool // selfExe is this process's binary: its built-ins are linked here
	searchPath []string
	builtins   []string
	fp         *fingerprints
	environ    func() []string
	// sockDir holds the plugins' unix sockets. A plugin that is killed
	// cannot remove its socket; removing the folder on Close does.
	sockDir string

	mu    sync.Mutex
	slots map[string]*slotEntry

	restarts atomic.Int64
	starts   atomic.Int64 // processes launched, for tests of the cache
	polls    atomic.Int64 // watch rounds done, for tests that wait on them
	wg       sync.WaitGroup
	done     chan struct{}
	closing  atomic.Bool
}

type slotEntry struct {
	ready chan struct{} // closed when s or err is set
	s     *slot
	err   error
}

// New makes a host; it starts no plugin until one is asked for.
func New(opts Options) (*Host, error) {
	if opts.Logger == nil {
		opts.Logger = hclog.Default()
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 20 * time.Second
	}
	if opts.DrainTimeout <= 0 {
		opts.DrainTimeout = 30 * time.Second
	}
	if opts.PollInterval == 0 {
		opts.PollInterval = 500 * time.Millisecond
	}
	h := &Host{opts: opts, log: opts.Logger.Named("plugins"), environ: os.Environ,
		slots: map[string]*slotEntry{}, done: make(chan struct{})}
	h.selfExe = opts.SelfExe
	if h.selfExe == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("plugin host: find own binary for built-in plugins: %w", err)
		}
		h.selfExe = exe
	}
	h.selfIsUs = opts.SelfExe == "" || isOwnExecutable(opts.SelfExe)
	h.searchPath = opts.SearchPath
	if h.searchPath == nil {
		h.searchPath = DefaultSearchPath(h.selfExe)
	}
	ids := opts.Builtins
	if ids == nil {
		ids = builtin.IDs()
	}
	for _, id := range ids {
		kind, name, ok := ParseID(id)
		if !ok {
			return nil, fmt.Errorf("plugin host: built-in plugin %q is not a <kind>-<name> id", id)
		}
		// Users' names resolve to the canonical one, so a plugin linked
		// under an alias would never be reached.
		if f, ok := firstparty.AliasOf(kind, name); ok {
			return nil, fmt.Errorf("plugin host: built-in plugin %s is registered under %q, another name of %s; register it as %q",
				id, name, f.ID(), f.Name)
		}
		h.builtins = append(h.builtins, string(kind)+"-"+CanonicalName(kind, name))
	}
	cache := opts.CachePath
	switch cache {
	case "":
		cache = DefaultCachePath()
	case "-":
		cache = ""
	}
	h.fp = loadFingerprints(cache)
	sockDir, err := makeSockDir()
	if err != nil {
		return nil, err
	}
	h.sockDir = sockDir
	if opts.PollInterval > 0 {
		h.wg.Add(1)
		go h.watch(opts.PollInterval)
	}
	if opts.ReloadOnSIGHUP {
		h.wg.Add(1)
		go h.reloadOnSIGHUP()
	}
	return h, nil
}

// Reward returns the reward plugin name configured with config.
func (h *Host) Reward(ctx context.Context, name string, config json.RawMessage) (reward.Combiner, error) {
	s, err := h.slot(ctx, sdk.KindReward, name, config)
	if err != nil {
		return nil, err
	}
	return rewardProxy{s}, nil
}

// ToolFormat returns the tool-format plugin name configured with config.
func (h *Host) ToolFormat(ctx context.Context, name string, config json.RawMessage) (toolformat.Parser, error) {
	s, err := h.slot(ctx, sdk.KindToolFormat, name, config)
	if err != nil {
		return nil, err
	}
	return toolFormatProxy{s}, nil
}

// Sandbox returns the sandbox plugin name configured with config.
func (h *Host) Sandbox(ctx context.Context, name string, config json.RawMessage) (sandbox.Driver, error) {
	s, err := h.slot(ctx, sdk.KindSandbox, name, config)
	if err != nil {
		return nil, err
	}
	return sandboxProxy{s}, nil
}

// slot returns the running slot for kind, name and config, starting its
// process on first use. Callers asking for the same plugin and config
// share one process.
func (h *Host) slot(ctx context.Context, kind sdk.Kind, name string, config json.RawMessage) (*slot, error) {
	if h.isClosed() {
		return nil, ErrClosed
	}
	name = CanonicalName(kind, strings.TrimPrefix(name, string(kind)+"-"))
	key := string(kind) + "-" + name + "\x00" + canonicalConfig(config)
	h.mu.Lock()
	e, ok := h.slots[key]
	if !ok {
		e = &slotEntry{ready: make(chan struct{})}
		h.slots[key] = e
	}
	h.mu.Unlock()
	if ok {
		select {
		case <-e.ready:
			return e.s, e.err
		case <-ctx.Done():
			return nil, fmt.Errorf("plugin %s-%s: waiting for its start: %w", kind, name, ctx.Err())
		}
	}
	s := &slot{h: h, kind: kind, name: name, config: config, log: h.log.Named(string(kind) + "-" + name)}
	in, err := s.launch(ctx)
	h.mu.Lock()
	if err != nil {
		// Forget the failure so a later call tries again.
		delete(h.slots, key)
		e.err = err
	} else if h.isClosed() {
		in.kill()
		e.err = ErrClosed
	} else {
		s.cur = in
		e.s = s
	}
	close(e.ready)
	h.mu.Unlock()
	return e.s, e.err
}

func canonicalConfig(config json.RawMessage) string {
	if isEmptyConfig(config) {
		return ""
	}
	var b bytes.Buffer
	if json.Compact(&b, config) != nil {
		return string(config)
	}
	return b.String()
}

// running lists the host's live slots.
func (h *Host) running() []*slot {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []*slot
	for _, e := range h.slots {
		if e.s != nil {
			out = append(out, e.s)
		}
	}
	return out
}

// List finds every plugin and says whether it works. A binary already
// fingerprinted (same sha256) is not launched again; others are started,
// asked for Info and stopped.
func (h *Host) List(ctx context.Context) ([]Entry, error) {
	cands := h.discover()
	out := make([]Entry, len(cands))
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	for i, c := range cands {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			out[i] = h.fingerprint(ctx, c)
		}()
	}
	wg.Wait()
	if err := h.fp.save(); err != nil {
		h.log.Warn("cannot save the plugin fingerprint cache", "error", err)
	}
	pids, local := map[string][]int{}, map[string]bool{}
	for _, s := range h.running() {
		s.mu.Lock()
		switch {
		case s.cur != nil && s.cur.local:
			local[s.id()] = true
		case s.cur != nil:
			pids[s.id()] = append(pids[s.id()], s.cur.pid)
		}
		s.mu.Unlock()
	}
	for i := range out {
		out[i].PIDs, out[i].InProcess = pids[out[i].ID()], local[out[i].ID()]
		sort.Ints(out[i].PIDs)
	}
	return out, ctx.Err()
}

// fingerprint makes c's Entry, from the cache when its binary is known.
func (h *Host) fingerprint(ctx context.Context, c candidate) Entry {
	e := Entry{Name: c.name, Kind: c.kind, Aliases: withAliases(c.kind, c.name)[1:], Source: c.source(),
		Command: append([]string{c.path}, c.args...)}
	failed := func(err error) Entry {
		e.Status = "failed: " + oneLine(err.Error())
		return e
	}
	if c.problem != "" {
		return failed(errors.New(c.problem))
	}
	sum, _, err := h.fp.hash(c.path)
	if err != nil {
		return failed(err)
	}
	e.SHA256 = sum
	info, ok := h.fp.info(sum, c.args)
	if ok {
		// The cache is keyed by content: a renamed copy of a plugin finds
		// the Info of the original, which must still name this one.
		if err := c.matches(info); err != nil {
			return failed(err)
		}
	} else {
		in, err := h.start(ctx, c, nil, true)
		if err != nil {
			return failed(err)
		}
		in.kill()
		info = in.info
		if in.sum == sum {
			h.fp.setInfo(sum, c.args, info)
		}
	}
	e.Info, e.Version, e.Status = info, info.Version, "ok"
	return e
}

// Inspect describes one plugin, named "<kind>-<name>", "<kind>/<name>" or
// just "<name>" when only one kind has a plugin of that name; the name may
// be an alias. Not found, the error is a *NotFoundError.
func (h *Host) Inspect(ctx context.Context, id string) (Entry, error) {
	cands := h.discover()
	var match []candidate
	kind, name, qualified := ParseID(id)
	if qualified {
		name = CanonicalName(kind, name)
		for _, c := range cands {
			if c.kind == kind && c.name == name {
				match = append(match, c)
			}
		}
	}
	if len(match) == 0 {
		for _, c := range cands {
			if c.name == CanonicalName(c.kind, id) {
				match = append(match, c)
			}
		}
	}
	switch len(match) {
	case 0:
		if qualified {
			return Entry{}, h.notFound(kind, name, cands)
		}
		return Entry{}, h.notFoundAnyKind(id, cands)
	case 1:
	default:
		var ids []string
		for _, c := range match {
			ids = append(ids, c.id())
		}
		return Entry{}, fmt.Errorf("plugin name %q is ambiguous: say which of %s", id, strings.Join(ids, ", "))
	}
	e := h.fingerprint(ctx, match[0])
	if err := h.fp.save(); err != nil {
		h.log.Warn("cannot save the plugin fingerprint cache", "error", err)
	}
	return e, nil
}

// Reload looks for plugins again (a new binary may now override one in
// use) and hot-swaps every running plugin whose binary changed. A plugin
// whose new binary fails keeps its old process; the errors say which.
func (h *Host) Reload() error {
	var errs []error
	for _, s := range h.running() {
		c, err := h.resolve(s.kind, s.name)
		if err != nil {
			errs = append(errs, fmt.Errorf("reload: %w; the running process keeps serving", err))
			continue
		}
		s.mu.Lock()
		in := s.cur
		s.mu.Unlock()
		why := "reload"
		if in != nil && in.local && c.builtin {
			continue // still the built-in, linked here: nothing to load
		}
		if in != nil {
			sum, _, err := h.fp.hash(c.path)
			if err == nil && c.path == in.cand.path && sum == in.sum && strings.Join(c.args, " ") == strings.Join(in.cand.args, " ") {
				continue
			}
			why = "reload: plugin now found at " + c.source()
		}
		ctx, cancel := context.WithTimeout(context.Background(), h.opts.StartTimeout+5*time.Second)
		if err := s.swap(ctx, why); err != nil {
			errs = append(errs, err)
		}
		cancel()
	}
	return errors.Join(errs...)
}

// Restarts counts restarts of crashed plugin processes since New, for
// /metrics.
func (h *Host) Restarts() int64 { return h.restarts.Load() }

// Close stops every plugin process and waits for them to exit.
func (h *Host) Close() error {
	if !h.closing.CompareAndSwap(false, true) {
		return nil
	}
	close(h.done)
	for _, s := range h.running() {
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			s.close()
		}()
	}
	h.wg.Wait()
	err := h.fp.save()
	if rmErr := os.RemoveAll(h.sockDir); rmErr != nil && err == nil {
		err = fmt.Errorf("plugin host: remove the plugin socket folder: %w", rmErr)
	}
	return err
}

func (h *Host) isClosed() bool { return h.closing.Load() }

// retire drains a swapped-out process in the background and then stops
// it; at DrainTimeout or Close it is killed with its calls.
func (h *Host) retire(in *instance, log hclog.Logger) {
	drained := in.retire()
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		select {
		case <-drained:
			log.Info("hot swap: old plugin drained; stopping it", "pid", in.pid)
		case <-time.After(h.opts.DrainTimeout):
			log.Warn("hot swap: old plugin still busy after the drain timeout; killing it", "pid", in.pid)
		case <-h.done:
		}
		in.kill()
	}()
}

// watch notices crashed processes and changed binaries of running plugins.
func (h *Host) watch(every time.Duration) {
	defer h.wg.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-h.done:
			return
		case <-t.C:
		}
		for _, s := range h.running() {
			s.mu.Lock()
			if in := s.cur; in != nil && in.exited() {
				s.crashedLocked(in, nil)
			}
			s.mu.Unlock()
			if ok, why := s.needsSwap(); ok {
				h.wg.Add(1)
				go func() {
					defer h.wg.Done()
					ctx, cancel := context.WithTimeout(context.Background(), h.opts.StartTimeout+5*time.Second)
					defer cancel()
					_ = s.swap(ctx, why) // logged by swap
				}()
			}
		}
		h.polls.Add(1)
	}
}

func (h *Host) reloadOnSIGHUP() {
	defer h.wg.Done()
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGHUP)
	defer signal.Stop(ch)
	for {
		select {
		case <-h.done:
			return
		case <-ch:
			h.log.Info("SIGHUP: reloading plugins")
			if err := h.Reload(); err != nil {
				h.log.Error("reload", "error", err)
			}
		}
	}
}
