package reward

import (
	"context"
	"sort"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/agentenv/agentenv/sdk"
	"github.com/agentenv/agentenv/sdk/internal/pb"
	"github.com/agentenv/agentenv/sdk/internal/wire"
)

// Serve is the whole main() of a reward plugin binary.
func Serve(p Plugin) { wire.Serve(sdk.KindReward, p, &GRPCPlugin{Impl: p}) }

// GRPCPlugin is the go-plugin glue for reward plugins. The host uses it
// with a nil Impl; Serve sets Impl.
type GRPCPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	Impl Plugin
}

var _ plugin.GRPCPlugin = (*GRPCPlugin)(nil)

func (p *GRPCPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	pb.RegisterBaseServer(s, &wire.BaseServer{Impl: p.Impl})
	pb.RegisterRewardServer(s, &server{impl: p.Impl})
	return nil
}

func (p *GRPCPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return &Client{BaseClient: wire.BaseClient{C: pb.NewBaseClient(c)}, c: pb.NewRewardClient(c)}, nil
}

type server struct {
	pb.UnimplementedRewardServer
	impl Plugin
}

func (s *server) Combine(ctx context.Context, req *pb.CombineRequest) (*pb.CombineResponse, error) {
	scores := make(map[string]float64, len(req.Scores))
	for _, sc := range req.Scores {
		scores[sc.Step] = sc.Score
	}
	r, err := s.impl.Combine(ctx, scores)
	if err != nil {
		return nil, wire.ToStatus(err)
	}
	return &pb.CombineResponse{Reward: r}, nil
}

// Client is the host side of a reward plugin.
type Client struct {
	wire.BaseClient
	c pb.RewardClient
}

var (
	_ Combiner   = (*Client)(nil)
	_ sdk.Remote = (*Client)(nil)
)

// Combine asks the plugin to combine scores.
func (c *Client) Combine(ctx context.Context, scores map[string]float64) (float64, error) {
	req := &pb.CombineRequest{Scores: make([]*pb.Score, 0, len(scores))}
	for step, s := range scores {
		req.Scores = append(req.Scores, &pb.Score{Step: step, Score: s})
	}
	sort.Slice(req.Scores, func(i, j int) bool { return req.Scores[i].Step < req.Scores[j].Step })
	r, err := c.c.Combine(ctx, req)
	if err != nil {
		return 0, wire.FromStatus(err)
	}
	return r.Reward, nil
}
