package toolformat

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"

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
	// Protocol is the protocol version the host dispenses this for (0 =
	// sdk.ProtocolVersion). A client below MinProtocol parses nothing: it
	// only answers Info, so the host can name the plugin it refuses.
	Protocol int
}

var _ plugin.GRPCPlugin = (*GRPCPlugin)(nil)

func (p *GRPCPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	pb.RegisterBaseServer(s, &wire.BaseServer{Impl: p.Impl})
	pb.RegisterToolFormatServer(s, &server{impl: p.Impl, sets: newSetCache(maxCachedSets, maxCachedBytes)})
	return nil
}

func (p *GRPCPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	protocol := p.Protocol
	if protocol == 0 {
		protocol = sdk.ProtocolVersion
	}
	return &Client{BaseClient: wire.BaseClient{C: pb.NewBaseClient(c)}, c: pb.NewToolFormatClient(c), conn: c,
		codec: newAnswerCodec(), protocol: protocol, sets: map[string]*sentSet{}}, nil
}

type server struct {
	pb.UnimplementedToolFormatServer
	impl Plugin
	sets *setCache
}

func (s *server) RegisterTools(_ context.Context, req *pb.RegisterToolsRequest) (*pb.RegisterToolsResponse, error) {
	tools := make([]Tool, len(req.Tools))
	size := 0
	for i, t := range req.Tools {
		tools[i] = Tool{Name: t.Name, Description: t.Description, Parameters: json.RawMessage(t.Parameters)}
		size += len(t.Name) + len(t.Description) + len(t.Parameters)
	}
	s.sets.put(req.ToolSet, tools, size)
	sdk.Logger().Debug("tool set registered", "tool_set", req.ToolSet, "tools", len(tools), "bytes", size)
	return &pb.RegisterToolsResponse{}, nil
}

func (s *server) Parse(ctx context.Context, req *pb.ParseRequest) (*pb.ParseResponse, error) {
	var tools []Tool
	if req.ToolSet != "" {
		var ok bool
		if tools, ok = s.sets.get(req.ToolSet); !ok {
			return &pb.ParseResponse{UnknownToolSet: true}, nil
		}
	}
	p, err := s.impl.Parse(ctx, req.Text, tools)
	if err != nil {
		return nil, wire.ToStatus(err)
	}
	return boundedResponse(p), nil
}

// Client is the host side of a tool-format plugin process. It registers
// each tool set with the process once, the first time a parse needs it.
type Client struct {
	wire.BaseClient
	c        pb.ToolFormatClient
	conn     grpc.ClientConnInterface
	codec    answerCodec
	protocol int

	mu         sync.Mutex
	sets       map[string]*sentSet // by id: the sets sent to this process
	registered atomic.Int64
}

// sentSet serializes the registration of one set, so parses of a new set
// at once send it once.
type sentSet struct {
	mu   sync.Mutex
	sent bool
}

// maxSentSets bounds what a Client remembers having sent; past it, it
// forgets all and sends again as needed (the plugin keeps its own bound).
const maxSentSets = 4096

var (
	_ Parser     = (*Client)(nil)
	_ SetParser  = (*Client)(nil)
	_ sdk.Remote = (*Client)(nil)
)

// Registrations counts the tool sets sent to this process so far.
func (c *Client) Registrations() int64 { return c.registered.Load() }

// Parse asks the plugin to read a reply against tools. A host parsing a
// turn's replies makes the set once and calls ParseSet.
func (c *Client) Parse(ctx context.Context, text string, tools []Tool) (Parsed, error) {
	return c.ParseSet(ctx, text, NewToolSet(tools))
}

// ParseSet asks the plugin to read a reply against set, sending the set
// first if this process has not had it. A plugin that lost it (restarted
// behind the same connection, or dropped it to bound its memory) says so,
// and the set is sent again and the parse retried once.
func (c *Client) ParseSet(ctx context.Context, text string, set *ToolSet) (Parsed, error) {
	if c.protocol < sdk.MinProtocol(sdk.KindToolFormat) {
		return Parsed{}, fmt.Errorf("the plugin speaks protocol %d; tool-format plugins need protocol %d: rebuild it against the current agentenv sdk/",
			c.protocol, sdk.MinProtocol(sdk.KindToolFormat))
	}
	if err := c.register(ctx, set, false); err != nil {
		return Parsed{}, err
	}
	// Protobuf strings must be UTF-8; a reply with invalid bytes (a model
	// cut mid-character) is read with those bytes as U+FFFD.
	req := &pb.ParseRequest{Text: ValidUTF8(text), ToolSet: set.ID()}
	r, err := c.parse(ctx, req)
	if err == nil && r.unknownToolSet {
		if err := c.register(ctx, set, true); err != nil {
			return Parsed{}, err
		}
		r, err = c.parse(ctx, req)
		if err == nil && r.unknownToolSet {
			return Parsed{}, fmt.Errorf("the plugin lost tool set %s again right after it was sent", set.ID())
		}
	}
	if err != nil {
		return Parsed{}, wire.FromStatus(err)
	}
	return r.p, nil
}

// parse calls the plugin's Parse, reading its answer with the host's
// bounds (answer.go) rather than decoding all of it.
func (c *Client) parse(ctx context.Context, req *pb.ParseRequest) (*answer, error) {
	out := new(answer)
	err := c.conn.Invoke(ctx, pb.ToolFormat_Parse_FullMethodName, req, out, grpc.ForceCodecV2(c.codec))
	return out, err
}

// fromResponse reads a plugin's answer.
func fromResponse(r *pb.ParseResponse) Parsed {
	out := Parsed{Content: r.Content, UnparsedOmitted: int(r.UnparsedOmitted), CallsOmitted: int(r.CallsOmitted)}
	if len(r.Calls) > 0 {
		out.Calls = make([]Call, len(r.Calls))
		for i, call := range r.Calls {
			// The arguments stay the bytes the plugin wrote, as far as the
			// env's MCP call.
			out.Calls[i] = Call{Name: call.Name, Arguments: json.RawMessage(call.Arguments)}
		}
	}
	for _, u := range r.Unparsed {
		out.Unparsed = append(out.Unparsed, Unparsed{Text: u.Text, Reason: u.Reason})
	}
	return out
}

// register sends set to the process unless it has it (again: send anyway,
// the process said it lost it).
func (c *Client) register(ctx context.Context, set *ToolSet, again bool) error {
	if set.ID() == "" {
		return nil
	}
	c.mu.Lock()
	e := c.sets[set.ID()]
	if e == nil {
		if len(c.sets) >= maxSentSets {
			c.sets = map[string]*sentSet{}
		}
		e = &sentSet{}
		c.sets[set.ID()] = e
	}
	c.mu.Unlock()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.sent && !again {
		return nil
	}
	req := &pb.RegisterToolsRequest{ToolSet: set.ID(), Tools: make([]*pb.Tool, len(set.Tools()))}
	for i, t := range set.Tools() {
		req.Tools[i] = &pb.Tool{Name: t.Name, Description: t.Description, Parameters: t.Parameters}
	}
	if _, err := c.c.RegisterTools(ctx, req); err != nil {
		return fmt.Errorf("sending the turn's tools: %w", wire.FromStatus(err))
	}
	e.sent = true
	c.registered.Add(1)
	return nil
}
