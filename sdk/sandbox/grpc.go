package sandbox

import (
	"context"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

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
	pb.RegisterSandboxServer(s, &server{impl: p.Impl})
	return nil
}

func (p *GRPCPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return &Client{BaseClient: wire.BaseClient{C: pb.NewBaseClient(c)}, c: pb.NewSandboxClient(c)}, nil
}

type server struct {
	pb.UnimplementedSandboxServer
	impl Plugin
}

func (s *server) Deploy(ctx context.Context, req *pb.DeployRequest) (*pb.SandboxInfo, error) {
	sb, err := s.impl.Deploy(ctx, Spec{
		Env: req.Env, Dir: req.Dir, Image: req.Image, Command: req.Command, Port: int(req.Port),
		EnvVars: req.EnvVars, CPU: req.Cpu, MemoryMB: int(req.MemoryMb), Labels: req.Labels,
	})
	if err != nil {
		return nil, wire.ToStatus(err)
	}
	return toPB(sb), nil
}

func (s *server) Terminate(ctx context.Context, req *pb.TerminateRequest) (*pb.TerminateResponse, error) {
	if err := s.impl.Terminate(ctx, req.Id); err != nil {
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
	r, err := s.impl.Exec(ctx, req.Id, req.Command)
	if err != nil {
		return nil, wire.ToStatus(err)
	}
	return &pb.ExecResponse{ExitCode: int32(r.ExitCode), Stdout: r.Stdout, Stderr: r.Stderr}, nil
}

func toPB(sb Sandbox) *pb.SandboxInfo {
	return &pb.SandboxInfo{Id: sb.ID, Endpoint: sb.Endpoint, Labels: sb.Labels, State: sb.State}
}

func fromPB(sb *pb.SandboxInfo) Sandbox {
	return Sandbox{ID: sb.Id, Endpoint: sb.Endpoint, Labels: sb.Labels, State: sb.State}
}

// Client is the host side of a sandbox plugin.
type Client struct {
	wire.BaseClient
	c pb.SandboxClient
}

var (
	_ Driver     = (*Client)(nil)
	_ sdk.Remote = (*Client)(nil)
)

// Deploy asks the plugin to deploy an env.
func (c *Client) Deploy(ctx context.Context, spec Spec) (Sandbox, error) {
	r, err := c.c.Deploy(ctx, &pb.DeployRequest{
		Env: spec.Env, Dir: spec.Dir, Image: spec.Image, Command: spec.Command, Port: int32(spec.Port),
		EnvVars: spec.EnvVars, Cpu: spec.CPU, MemoryMb: int32(spec.MemoryMB), Labels: spec.Labels,
	})
	if err != nil {
		return Sandbox{}, wire.FromStatus(err)
	}
	return fromPB(r), nil
}

// Terminate asks the plugin to tear a sandbox down.
func (c *Client) Terminate(ctx context.Context, id string) error {
	_, err := c.c.Terminate(ctx, &pb.TerminateRequest{Id: id})
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

// Exec asks the plugin to run a command in a sandbox.
func (c *Client) Exec(ctx context.Context, id string, cmd []string) (ExecResult, error) {
	r, err := c.c.Exec(ctx, &pb.ExecRequest{Id: id, Command: cmd})
	if err != nil {
		return ExecResult{}, wire.FromStatus(err)
	}
	return ExecResult{ExitCode: int(r.ExitCode), Stdout: r.Stdout, Stderr: r.Stderr}, nil
}
