package sandbox

import (
	"context"
	"time"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/agentenv/agentenv/sdk"
	"github.com/agentenv/agentenv/sdk/internal/pb"
	"github.com/agentenv/agentenv/sdk/internal/wire"
)

// Serve is the whole main() of a sandbox plugin binary.
func Serve(p Plugin) { wire.Serve(sdk.KindSandbox, p, &GRPCPlugin{Impl: p}) }

// GRPCPlugin is the go-plugin glue for sandbox plugins. The host uses it
// with a nil Impl; Serve sets Impl.
type GRPCPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	Impl Plugin
}

var _ plugin.GRPCPlugin = (*GRPCPlugin)(nil)

func (p *GRPCPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	pb.RegisterBaseServer(s, &wire.BaseServer{Impl: p.Impl})
	prep, _ := p.Impl.(Preparer)
	pb.RegisterSandboxServer(s, &server{impl: p.Impl, prep: &preparer{impl: prep, envs: map[string]*prepared{}}})
	return nil
}

func (p *GRPCPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return &Client{BaseClient: wire.BaseClient{C: pb.NewBaseClient(c)}, c: pb.NewSandboxClient(c)}, nil
}

type server struct {
	pb.UnimplementedSandboxServer
	impl Plugin
	prep *preparer
}

func (s *server) Prepare(ctx context.Context, req *pb.PrepareRequest) (*pb.PrepareResponse, error) {
	if err := s.prep.prepare(ctx, specFromPB(req.Spec)); err != nil {
		return nil, wire.ToStatus(err)
	}
	return &pb.PrepareResponse{}, nil
}

// Deploy prepares the env first (once per process), so a plugin restarted
// since the host's Prepare call still builds before it deploys.
func (s *server) Deploy(ctx context.Context, req *pb.DeployRequest) (*pb.SandboxInfo, error) {
	spec := specFromPB(req)
	if err := s.prep.prepare(ctx, spec); err != nil {
		return nil, wire.ToStatus(err)
	}
	sb, err := s.impl.Deploy(ctx, spec)
	if err != nil {
		return nil, wire.ToStatus(err)
	}
	return toPB(sb), nil
}

func (s *server) Terminate(ctx context.Context, req *pb.TerminateRequest) (*pb.TerminateResponse, error) {
	if err := s.impl.Terminate(ctx, fromPB(req.Sandbox)); err != nil {
		return nil, wire.ToStatus(err)
	}
	return &pb.TerminateResponse{}, nil
}

func (s *server) List(ctx context.Context, req *pb.ListRequest) (*pb.ListResponse, error) {
	sbs, err := s.impl.List(ctx, req.Labels)
	if err != nil {
		return nil, wire.ToStatus(err)
	}
	out := &pb.ListResponse{}
	for _, sb := range sbs {
		out.Sandboxes = append(out.Sandboxes, toPB(sb))
	}
	return out, nil
}

func (s *server) Exec(ctx context.Context, req *pb.ExecRequest) (*pb.ExecResponse, error) {
	r, err := s.impl.Exec(ctx, fromPB(req.Sandbox), req.Command)
	if err != nil {
		return nil, wire.ToStatus(err)
	}
	return &pb.ExecResponse{ExitCode: int32(r.ExitCode), Stdout: r.Stdout, Stderr: r.Stderr}, nil
}

// Explain answers "" for a plugin that cannot explain.
func (s *server) Explain(ctx context.Context, req *pb.ExplainRequest) (*pb.ExplainResponse, error) {
	ex, ok := s.impl.(Explainer)
	if !ok {
		return &pb.ExplainResponse{}, nil
	}
	why, err := ex.Explain(ctx, fromPB(req.Sandbox))
	if err != nil {
		return nil, wire.ToStatus(err)
	}
	return &pb.ExplainResponse{Why: why}, nil
}

func specToPB(spec Spec) *pb.DeployRequest {
	return &pb.DeployRequest{
		Env: spec.Env, Dir: spec.Dir, Image: spec.Image, Command: spec.Command, Build: spec.Build,
		Port: int32(spec.Port), EnvVars: spec.EnvVars, Cpu: spec.CPU, MemoryMb: int32(spec.MemoryMB),
		Labels: spec.Labels, StorageMb: int32(spec.StorageMB), NoInternet: spec.NoInternet,
		BuildTimeoutSec: int32(spec.BuildTimeout / time.Second), Terminal: terminalToPB(spec.Terminal),
	}
}

func terminalToPB(t *Terminal) *pb.TerminalSpec {
	if t == nil {
		return nil
	}
	return &pb.TerminalSpec{Workdir: t.Workdir}
}

func terminalFromPB(t *pb.TerminalSpec) *Terminal {
	if t == nil {
		return nil
	}
	return &Terminal{Workdir: t.Workdir}
}

func specFromPB(req *pb.DeployRequest) Spec {
	if req == nil {
		return Spec{}
	}
	return Spec{
		Env: req.Env, Dir: req.Dir, Image: req.Image, Command: req.Command, Build: req.Build,
		Port: int(req.Port), EnvVars: req.EnvVars, CPU: req.Cpu, MemoryMB: int(req.MemoryMb),
		Labels: req.Labels, StorageMB: int(req.StorageMb), NoInternet: req.NoInternet,
		BuildTimeout: time.Duration(req.BuildTimeoutSec) * time.Second, Terminal: terminalFromPB(req.Terminal),
	}
}

func toPB(sb Sandbox) *pb.SandboxInfo {
	return &pb.SandboxInfo{Id: sb.ID, Endpoint: sb.Endpoint, Labels: sb.Labels, State: sb.State}
}

func fromPB(sb *pb.SandboxInfo) Sandbox {
	if sb == nil {
		return Sandbox{}
	}
	return Sandbox{ID: sb.Id, Endpoint: sb.Endpoint, Labels: sb.Labels, State: sb.State}
}

// Client is the host side of a sandbox plugin.
type Client struct {
	wire.BaseClient
	c pb.SandboxClient
}

var (
	_ Driver     = (*Client)(nil)
	_ Preparer   = (*Client)(nil)
	_ Explainer  = (*Client)(nil)
	_ sdk.Remote = (*Client)(nil)
)

// Prepare asks the plugin to prepare an env (a no-op for plugins that
// prepare nothing).
func (c *Client) Prepare(ctx context.Context, spec Spec) error {
	_, err := c.c.Prepare(ctx, &pb.PrepareRequest{Spec: specToPB(spec)})
	return wire.FromStatus(err)
}

// Deploy asks the plugin to deploy an env.
func (c *Client) Deploy(ctx context.Context, spec Spec) (Sandbox, error) {
	r, err := c.c.Deploy(ctx, specToPB(spec))
	if err != nil {
		return Sandbox{}, wire.FromStatus(err)
	}
	return fromPB(r), nil
}

// Terminate asks the plugin to tear the sandbox of a handle down.
func (c *Client) Terminate(ctx context.Context, sb Sandbox) error {
	_, err := c.c.Terminate(ctx, &pb.TerminateRequest{Sandbox: toPB(sb)})
	return wire.FromStatus(err)
}

// List asks the plugin for the live sandboxes carrying labels.
func (c *Client) List(ctx context.Context, labels map[string]string) ([]Sandbox, error) {
	r, err := c.c.List(ctx, &pb.ListRequest{Labels: labels})
	if err != nil {
		return nil, wire.FromStatus(err)
	}
	out := make([]Sandbox, 0, len(r.Sandboxes))
	for _, sb := range r.Sandboxes {
		out = append(out, fromPB(sb))
	}
	return out, nil
}

// Exec asks the plugin to run a command in the sandbox of a handle.
func (c *Client) Exec(ctx context.Context, sb Sandbox, cmd []string) (ExecResult, error) {
	r, err := c.c.Exec(ctx, &pb.ExecRequest{Sandbox: toPB(sb), Command: cmd})
	if err != nil {
		return ExecResult{}, wire.FromStatus(err)
	}
	return ExecResult{ExitCode: int(r.ExitCode), Stdout: r.Stdout, Stderr: r.Stderr}, nil
}

// Explain asks the plugin why the env of a handle stopped answering; a
// plugin built before the call existed answers "".
func (c *Client) Explain(ctx context.Context, sb Sandbox) (string, error) {
	r, err := c.c.Explain(ctx, &pb.ExplainRequest{Sandbox: toPB(sb)})
	if status.Code(err) == codes.Unimplemented {
		return "", nil
	}
	if err != nil {
		return "", wire.FromStatus(err)
	}
	return r.Why, nil
}
