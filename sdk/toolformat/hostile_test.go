package toolformat

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/agentenv/agentenv/sdk"
	"github.com/agentenv/agentenv/sdk/internal/pb"
	"github.com/agentenv/agentenv/sdk/internal/wire"
)

// hostileServer is a plugin binary that does not use this SDK's server
// (or a changed copy of it): it answers with what it likes, or never.
type hostileServer struct {
	pb.UnimplementedToolFormatServer
	answer *pb.ParseResponse
	hang   bool
}

func (s *hostileServer) RegisterTools(context.Context, *pb.RegisterToolsRequest) (*pb.RegisterToolsResponse, error) {
	return &pb.RegisterToolsResponse{}, nil
}

func (s *hostileServer) Parse(ctx context.Context, _ *pb.ParseRequest) (*pb.ParseResponse, error) {
	if s.hang {
		select {} // ignores its context too
	}
	return s.answer, nil
}

// hostilePlugin serves hostileServer and hands the host the SDK's client.
type hostilePlugin struct {
	plugin.NetRPCUnsupportedPlugin
	srv *hostileServer
}

func (p *hostilePlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	pb.RegisterBaseServer(s, &wire.BaseServer{Impl: floodInfo{}})
	pb.RegisterToolFormatServer(s, p.srv)
	return nil
}

func (p *hostilePlugin) GRPCClient(ctx context.Context, b *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return (&GRPCPlugin{}).GRPCClient(ctx, b, c)
}

type floodInfo struct{}

func (floodInfo) Info() sdk.Info {
	return sdk.Info{Name: "hostile", Kind: sdk.KindToolFormat, Version: "1", Protocols: []int{sdk.ProtocolVersion}}
}

func hostileClient(t *testing.T, srv *hostileServer) *Client {
	client, _ := plugin.TestPluginGRPCConn(t, false, map[string]plugin.Plugin{string(sdk.KindToolFormat): &hostilePlugin{srv: srv}})
	t.Cleanup(func() { _ = client.Close() })
	raw, err := client.Dispense(string(sdk.KindToolFormat))
	if err != nil {
		t.Fatal(err)
	}
	return raw.(*Client)
}

// The host bounds a plugin's answer itself, as the SDK's plugin side
// does: a plugin binary that sends 1.5 million unparsed entries (the
// server grew 424 MiB a parse decoding them) gets 64 of them kept, each
// cut, and the rest counted, at the cost of the message's bytes.
func TestHostBoundsAPluginsAnswer(t *testing.T) {
	const n = 1_500_000
	answer := &pb.ParseResponse{Content: "c", Unparsed: make([]*pb.Unparsed, n)}
	entry := &pb.Unparsed{Text: "<tool_call>x</tool_call>", Reason: "bad"}
	for i := range answer.Unparsed {
		answer.Unparsed[i] = entry
	}
	answer.Unparsed[0] = &pb.Unparsed{Text: strings.Repeat("t", 5000), Reason: strings.Repeat("r", 5000)}
	answer.Calls = []*pb.Call{{Name: "ok", Arguments: []byte(`{}`)}}
	c := hostileClient(t, &hostileServer{answer: answer})
	// The server's side of the test marshals the answer in this process
	// too: measure that, then the whole call.
	runtime.GC()
	wireBytes := uint64(len(mustMarshal(t, answer)))
	var got Parsed
	var err error
	n2 := allocated(func() { got, err = c.Parse(context.Background(), "reply", nil) })
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("answer of %d MiB on the wire: %d MiB allocated by the call (both sides)", wireBytes>>20, n2>>20)
	if limit := 8*wireBytes + 8<<20; n2 > limit {
		t.Errorf("reading an answer of %d MiB allocated %d MiB, want under %d MiB", wireBytes>>20, n2>>20, limit>>20)
	}
	if len(got.Unparsed) != MaxUnparsedSent || got.UnparsedOmitted != n-MaxUnparsedSent {
		t.Fatalf("%d unparsed kept, %d counted; want %d and the rest counted", len(got.Unparsed), got.UnparsedOmitted, MaxUnparsedSent)
	}
	if len(got.Unparsed[0].Text) > 1100 || len(got.Unparsed[0].Reason) > 1100 {
		t.Errorf("a long entry is kept whole: %d, %d bytes", len(got.Unparsed[0].Text), len(got.Unparsed[0].Reason))
	}
	if len(got.Calls) != 1 || got.Content != "c" {
		t.Errorf("calls %+v, content %q", got.Calls, got.Content)
	}
}

// A plugin that never answers holds a parse only until its deadline.
func TestParseDeadlineHoldsAgainstAHungPlugin(t *testing.T) {
	c := hostileClient(t, &hostileServer{hang: true})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { _, err := c.Parse(ctx, "reply", nil); done <- err }()
	select {
	case err := <-done:
		// gRPC's own deadline timer may fire a moment before the
		// context's: a DeadlineExceeded status counts as the deadline, and
		// so does a stream it cancelled for the deadline (RST_STREAM
		// CANCEL: context deadline exceeded), seen on a busy machine.
		early := err == nil || ctx.Err() == nil && status.Code(err) != codes.DeadlineExceeded &&
			!strings.Contains(err.Error(), context.DeadlineExceeded.Error())
		if early {
			t.Fatalf("a parse of a hung plugin returned %v before its deadline", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("a parse of a hung plugin outlived its deadline by a minute")
	}
}

func mustMarshal(t *testing.T, m *pb.ParseResponse) []byte {
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}
