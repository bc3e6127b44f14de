package pluginhost

import (
	"context"
	"fmt"

	"github.com/agentenv/agentenv/sdk"
	"github.com/agentenv/agentenv/sdk/reward"
	"github.com/agentenv/agentenv/sdk/sandbox"
	"github.com/agentenv/agentenv/sdk/toolformat"
)

// The proxies route each call to the slot's current process, so restarts
// and hot swaps are invisible to callers except for the calls a crash
// interrupts. Each also answers Info with the current process's Info.

// call runs fn on the slot's current process, as the kind's interface T.
func call[T any, R any](ctx context.Context, s *slot, fn func(T) (R, error)) (R, error) {
	var zero R
	in, err := s.acquire(ctx)
	if err != nil {
		return zero, err
	}
	defer in.release()
	impl, ok := in.raw.(T)
	if !ok {
		return zero, fmt.Errorf("plugin %s: the SDK's %s client lacks this call (a bug in agentenv)", s.id(), s.kind)
	}
	r, err := fn(impl)
	return r, s.failed(ctx, in, err)
}

// info is the Info of the process now serving the slot, or of the last
// one if it is down.
func (s *slot) info() sdk.Info {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur != nil {
		s.lastInfo = s.cur.info
	}
	return s.lastInfo
}

type rewardProxy struct{ s *slot }

var (
	_ reward.Combiner = rewardProxy{}
	_ sdk.Informer    = rewardProxy{}
)

func (p rewardProxy) Info() sdk.Info { return p.s.info() }

func (p rewardProxy) Combine(ctx context.Context, scores map[string]float64) (float64, error) {
	return call(ctx, p.s, func(c reward.Combiner) (float64, error) { return c.Combine(ctx, scores) })
}

type toolFormatProxy struct{ s *slot }

var (
	_ toolformat.Parser    = toolFormatProxy{}
	_ toolformat.SetParser = toolFormatProxy{}
	_ sdk.Informer         = toolFormatProxy{}
)

func (p toolFormatProxy) Info() sdk.Info { return p.s.info() }

func (p toolFormatProxy) Parse(ctx context.Context, text string, tools []toolformat.Tool) (toolformat.Parsed, error) {
	return p.ParseSet(ctx, text, toolformat.NewToolSet(tools))
}

// ParseSet parses against a turn's tool set. Each process is sent a set
// once, by its own client: a restarted or swapped-in process is sent it
// again on its first parse of it.
func (p toolFormatProxy) ParseSet(ctx context.Context, text string, set *toolformat.ToolSet) (toolformat.Parsed, error) {
	return call(ctx, p.s, func(c toolformat.SetParser) (toolformat.Parsed, error) { return c.ParseSet(ctx, text, set) })
}

type sandboxProxy struct{ s *slot }

var (
	_ sandbox.Driver    = sandboxProxy{}
	_ sandbox.Preparer  = sandboxProxy{}
	_ sandbox.Explainer = sandboxProxy{}
	_ sdk.Informer      = sandboxProxy{}
)

// Prepare asks the plugin to prepare an env (see sandbox.Preparer); every
// sandbox plugin answers it, as a no-op when it prepares nothing.
func (p sandboxProxy) Prepare(ctx context.Context, spec sandbox.Spec) error {
	_, err := call(ctx, p.s, func(d sandbox.Preparer) (struct{}, error) { return struct{}{}, d.Prepare(ctx, spec) })
	return err
}

func (p sandboxProxy) Info() sdk.Info { return p.s.info() }

func (p sandboxProxy) Deploy(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	return call(ctx, p.s, func(d sandbox.Driver) (sandbox.Sandbox, error) { return d.Deploy(ctx, spec) })
}

func (p sandboxProxy) Terminate(ctx context.Context, sb sandbox.Sandbox) error {
	_, err := call(ctx, p.s, func(d sandbox.Driver) (struct{}, error) { return struct{}{}, d.Terminate(ctx, sb) })
	return err
}

func (p sandboxProxy) List(ctx context.Context, labels map[string]string) ([]sandbox.Sandbox, error) {
	return call(ctx, p.s, func(d sandbox.Driver) ([]sandbox.Sandbox, error) { return d.List(ctx, labels) })
}

func (p sandboxProxy) Exec(ctx context.Context, sb sandbox.Sandbox, cmd []string) (sandbox.ExecResult, error) {
	return call(ctx, p.s, func(d sandbox.Driver) (sandbox.ExecResult, error) { return d.Exec(ctx, sb, cmd) })
}

// Explain asks the plugin why a sandbox's env stopped answering (see
// sandbox.Explainer); every sandbox plugin answers it, "" when it cannot.
func (p sandboxProxy) Explain(ctx context.Context, sb sandbox.Sandbox) (string, error) {
	return call(ctx, p.s, func(d sandbox.Explainer) (string, error) { return d.Explain(ctx, sb) })
}
