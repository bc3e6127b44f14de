package pluginhost

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/agentenv/agentenv/sdk"
	"github.com/agentenv/agentenv/sdk/builtin"
	"github.com/agentenv/agentenv/sdk/toolformat"
)

// startLocal runs c in the host's own process when it may: a built-in
// tool format that this process links (builtin.Plugin.New), served by
// this binary, with IsolateToolFormats off. ok is false when c must run
// as a subprocess. The instance has no process: it never exits, kill is a
// no-op, and the watch never swaps it (the code cannot change under a
// running process); Reload moves it to a plugin binary that now overrides
// the built-in.
func (h *Host) startLocal(c candidate) (in *instance, ok bool, err error) {
	if !c.builtin || c.kind != sdk.KindToolFormat || h.opts.IsolateToolFormats || !h.selfIsUs {
		return nil, false, nil
	}
	p, found := builtin.Lookup(c.id())
	if !found || p.New == nil {
		return nil, false, nil
	}
	impl, isFormat := p.New().(toolformat.Plugin)
	if !isFormat {
		return nil, true, fmt.Errorf("built-in %s: its New makes no tool format (a bug in agentenv)", c.id())
	}
	local := toolformat.NewLocal(impl, h.log.Named(c.id()))
	in = &instance{cand: c, local: true, raw: local, remote: local, started: time.Now(),
		stderr: &tailBuffer{max: 1}, drained: make(chan struct{})}
	in.info, _ = local.RemoteInfo(context.Background())
	if err := c.matches(in.info); err != nil {
		return nil, true, err
	}
	if in.schema, err = compileSchema(in.info.ConfigSchema); err != nil {
		return nil, true, err
	}
	return in, true, nil
}

// isOwnExecutable reports whether path is this process's binary.
func isOwnExecutable(path string) bool {
	exe, err := os.Executable()
	if err != nil {
		return false
	}
	a, errA := os.Stat(exe)
	b, errB := os.Stat(filepath.Clean(path))
	return errA == nil && errB == nil && os.SameFile(a, b)
}
