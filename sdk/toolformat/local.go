package toolformat

import (
	"context"
	"fmt"
	"runtime/debug"

	"github.com/hashicorp/go-hclog"

	"github.com/agentenv/agentenv/sdk"
	"github.com/agentenv/agentenv/sdk/internal/wire"
)

// Local is a tool-format plugin that a host runs in its own process: a
// built-in format the host's binary links. It answers as Client answers
// for the same plugin over gRPC (the reply made valid UTF-8, the answer
// bounded as the wire bounds it, the plugin's errors as the host reads
// them), without the process and the round trip. A panic in the parser
// is the call's error, not the host's end.
type Local struct {
	wire.Local
	impl Plugin
	log  hclog.Logger
}

var (
	_ Parser     = (*Local)(nil)
	_ SetParser  = (*Local)(nil)
	_ sdk.Remote = (*Local)(nil)
)

// NewLocal runs p in this process; log (nil = none) gets the stack of a
// panic.
func NewLocal(p Plugin, log hclog.Logger) *Local {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return &Local{Local: wire.Local{Impl: p}, impl: p, log: log}
}

// Parse reads a reply against tools.
func (l *Local) Parse(ctx context.Context, text string, tools []Tool) (Parsed, error) {
	return l.ParseSet(ctx, text, NewToolSet(tools))
}

// ParseSet reads a reply against a turn's tool set. It returns when ctx
// ends even if the parser goes on: a parser that looks at ctx (the
// built-in ones do) then stops soon after, as a plugin process's would.
func (l *Local) ParseSet(ctx context.Context, text string, set *ToolSet) (Parsed, error) {
	type result struct {
		p   Parsed
		err error
	}
	done := make(chan result, 1)
	go func() {
		p, err := l.parse(ctx, text, set)
		done <- result{p, err}
	}()
	select {
	case r := <-done:
		return r.p, r.err
	case <-ctx.Done():
		return Parsed{}, fmt.Errorf("tool format %s: %w", l.impl.Info().Name, ctx.Err())
	}
}

func (l *Local) parse(ctx context.Context, text string, set *ToolSet) (out Parsed, err error) {
	defer func() {
		if v := recover(); v != nil {
			// The stack names source paths: it goes to the log only.
			l.log.Error("tool format panicked", "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			out, err = Parsed{}, fmt.Errorf("tool format %s failed on this reply (it panicked: %v); the server's log has the stack", l.impl.Info().Name, v)
		}
	}()
	p, err := l.impl.Parse(ctx, ValidUTF8(text), set.Tools())
	if err != nil {
		if ctx.Err() != nil {
			return Parsed{}, fmt.Errorf("tool format %s: %w", l.impl.Info().Name, ctx.Err())
		}
		return Parsed{}, wire.FromStatus(wire.ToStatus(err))
	}
	return fromResponse(boundedResponse(p)), nil
}
