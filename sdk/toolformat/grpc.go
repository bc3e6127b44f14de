package toolformat

import (
	"context"
	"encoding/json"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/agentenv/agentenv/sdk"
	"github.com/agentenv/agentenv/sdk/internal/pb"
	"github.com/agentenv/agentenv/sdk/internal/wire"
)

// Serve is the whole main() of a tool-format plugin binary.
func Serve(p Plugin) { wire.Serve(sdk.KindToolFormat, p, &GRPCPlugin{Impl: p}) }

// GRPCPlugin is the go-plugin glue for tool-format plugins. The host uses
// it with a nil Impl; Serve sets Impl.
type GRPCPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	Impl Plugin
}

var _ plugin.GRPCPlugin = (*GRPCPlugin)(nil)

func (p *GRPCPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	pb.RegisterBaseServer(s, &wire.BaseServer{Impl: p.Impl})
	pb.RegisterToolFormatServer(s, &server{impl: p.Impl})
	return nil
}

func (p *GRPCPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return &Client{BaseClient: wire.BaseClient{C: pb.NewBaseClient(c)}, c: pb.NewToolFormatClient(c)}, nil
}

type server struct {
	pb.UnimplementedToolFormatServer
	impl Plugin
}

func (s *server) Parse(ctx context.Context, req *pb.ParseRequest) (*pb.ParseResponse, error) {
	tools := make([]Tool, len(req.Tools))
	for i, t := range req.Tools {
		tools[i] = Tool{Name: t.Name, Description: t.Description, Parameters: json.RawMessage(t.Parameters)}
	}
	p, err := s.impl.Parse(ctx, req.Text, tools)
	if err != nil {
		return nil, wire.ToStatus(err)
	}
	return boundedResponse(p), nil
}

// Client is the host side of a tool-format plugin.
type Client struct {
	wire.BaseClient
	c pb.ToolFormatClient
}

var (
	_ Parser     = (*Client)(nil)
	_ sdk.Remote = (*Client)(nil)
)

// Parse asks the plugin to read a reply.
func (c *Client) Parse(ctx context.Context, text string, tools []Tool) (Parsed, error) {
	// Protobuf strings must be UTF-8; a reply with invalid bytes (a model
	// cut mid-character) is read with those bytes as U+FFFD.
	req := &pb.ParseRequest{Text: ValidUTF8(text), Tools: make([]*pb.Tool, len(tools))}
	for i, t := range tools {
		req.Tools[i] = &pb.Tool{Name: t.Name, Description: t.Description, Parameters: t.Parameters}
	}
	r, err := c.c.Parse(ctx, req)
	if err != nil {
		return Parsed{}, wire.FromStatus(err)
	}
	out := Parsed{Content: r.Content, UnparsedOmitted: int(r.UnparsedOmitted), CallsOmitted: int(r.CallsOmitted)}
	for _, call := range r.Calls {
		out.Calls = append(out.Calls, Call{Name: call.Name, Arguments: json.RawMessage(call.Arguments)})
	}
	for _, u := range r.Unparsed {
		out.Unparsed = append(out.Unparsed, Unparsed{Text: u.Text, Reason: u.Reason})
	}
	return out, nil
}
