// Package wire is the gRPC glue shared by the plugin kinds: the Base
// service every plugin serves, error translation, and Serve.
package wire

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/agentenv/agentenv/sdk"
	"github.com/agentenv/agentenv/sdk/internal/pb"
)

// BaseServer serves Info and Configure for any plugin.
type BaseServer struct {
	pb.UnimplementedBaseServer
	Impl sdk.Informer
}

func (s *BaseServer) Info(context.Context, *pb.InfoRequest) (*pb.InfoResponse, error) {
	info := s.Impl.Info()
	out := &pb.InfoResponse{
		Name:         info.Name,
		Kind:         string(info.Kind),
		Version:      info.Version,
		ConfigSchema: info.ConfigSchema,
	}
	for _, p := range sdk.Protocols(info.Kind) {
		out.Protocols = append(out.Protocols, int32(p))
	}
	return out, nil
}

func (s *BaseServer) Configure(ctx context.Context, req *pb.ConfigureRequest) (*pb.ConfigureResponse, error) {
	if err := configure(ctx, s.Impl, req.Config); err != nil {
		return nil, err
	}
	return &pb.ConfigureResponse{}, nil
}

// configure hands impl its config, answering as a gRPC status.
func configure(ctx context.Context, impl sdk.Informer, config []byte) error {
	c, ok := impl.(sdk.Configurer)
	if !ok {
		if len(config) == 0 || string(config) == "null" || string(config) == "{}" {
			return nil
		}
		return status.Error(codes.InvalidArgument, "plugin takes no configuration")
	}
	return ToStatus(c.Configure(ctx, json.RawMessage(config)))
}

// Local answers the Base calls of a plugin the host runs in its own
// process, as BaseServer and BaseClient answer them together over the
// wire: the same Info (with the protocols the SDK serves) and the same
// errors.
type Local struct {
	Impl sdk.Informer
}

// RemoteInfo is the plugin's Info, as RemoteInfo reads it over the wire.
func (l Local) RemoteInfo(context.Context) (sdk.Info, error) {
	info := l.Impl.Info()
	info.Protocols = sdk.Protocols(info.Kind)
	return info, nil
}

// Configure hands the plugin its configuration.
func (l Local) Configure(ctx context.Context, config json.RawMessage) error {
	return FromStatus(configure(ctx, l.Impl, config))
}

// BaseClient is the host side of the Base service.
type BaseClient struct {
	C pb.BaseClient
}

// RemoteInfo asks the plugin for its Info.
func (c *BaseClient) RemoteInfo(ctx context.Context) (sdk.Info, error) {
	r, err := c.C.Info(ctx, &pb.InfoRequest{})
	if err != nil {
		return sdk.Info{}, FromStatus(err)
	}
	info := sdk.Info{Name: r.Name, Kind: sdk.Kind(r.Kind), Version: r.Version}
	if len(r.ConfigSchema) > 0 {
		info.ConfigSchema = json.RawMessage(r.ConfigSchema)
	}
	for _, p := range r.Protocols {
		info.Protocols = append(info.Protocols, int(p))
	}
	return info, nil
}

// Configure sends the plugin its configuration.
func (c *BaseClient) Configure(ctx context.Context, config json.RawMessage) error {
	_, err := c.C.Configure(ctx, &pb.ConfigureRequest{Config: config})
	return FromStatus(err)
}

// sentinels maps errors that cross the wire to the codes that carry them.
var sentinels = []struct {
	err  error
	code codes.Code
}{
	{sdk.ErrNotFound, codes.NotFound},
	{sdk.ErrUnsupported, codes.Unimplemented},
}

// ToStatus turns a plugin's error into a gRPC status, keeping context
// errors and known sentinels recognisable on the host side.
func ToStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	}
	for _, s := range sentinels {
		if errors.Is(err, s.err) {
			return status.Error(s.code, err.Error())
		}
	}
	return status.Error(codes.Unknown, err.Error())
}

// FromStatus turns a gRPC error back into an error the host can test with
// errors.Is (sentinels, context errors) and read without "rpc error" noise.
func FromStatus(err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	pe := &sdk.PluginError{Code: st.Code(), Message: st.Message()}
	switch st.Code() {
	case codes.DeadlineExceeded:
		return fmt.Errorf("%w: %w", pe, context.DeadlineExceeded)
	case codes.Canceled:
		return fmt.Errorf("%w: %w", pe, context.Canceled)
	case codes.Unavailable:
		return fmt.Errorf("plugin unavailable: %w", pe)
	}
	for _, s := range sentinels {
		if st.Code() == s.code {
			return fmt.Errorf("%w: %w", pe, s.err)
		}
	}
	return pe
}

// DialOptions are the host's gRPC options for talking to plugins
// (plugin.ClientConfig.GRPCDialOptions).
func DialOptions() []grpc.DialOption {
	return []grpc.DialOption{grpc.WithDefaultCallOptions(
		grpc.MaxCallRecvMsgSize(sdk.MaxMessageBytes), grpc.MaxCallSendMsgSize(sdk.MaxMessageBytes))}
}

// Serve runs a plugin binary's whole life: handshake, then serving until
// the host stops it, then impl's Cleanup if it is an sdk.Cleaner. It does
// not return.
func Serve(kind sdk.Kind, impl sdk.Informer, p plugin.Plugin) {
	// Anything written to stdout before the handshake line breaks it, so
	// the standard logger must never point there: it goes through the
	// plugin's logger, which the host re-logs at the line's level and
	// under the plugin's name, with one timestamp (the host's).
	logger := sdk.Logger()
	hclog.SetDefault(logger)
	log.SetFlags(0)
	log.SetOutput(logger.StandardWriter(&hclog.StandardLoggerOptions{InferLevels: true}))
	if info := impl.Info(); info.Kind != kind {
		fmt.Fprintf(os.Stderr, "agentenv plugin %q: Info().Kind is %q, but it is served as a %s plugin\n", info.Name, info.Kind, kind)
		os.Exit(1)
	}
	// Every version the kind speaks: go-plugin picks the newest the host
	// offers too, so a sandbox or reward plugin still serves an older host.
	versions := map[int]plugin.PluginSet{}
	for _, v := range sdk.Protocols(kind) {
		versions[v] = plugin.PluginSet{string(kind): p}
	}
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig:  sdk.Handshake,
		VersionedPlugins: versions,
		Logger:           logger,
		GRPCServer: func(opts []grpc.ServerOption) *grpc.Server {
			return grpc.NewServer(append(opts,
				grpc.MaxRecvMsgSize(sdk.MaxMessageBytes), grpc.MaxSendMsgSize(sdk.MaxMessageBytes))...)
		},
	})
	// The host stopped the plugin (go-plugin's graceful kill): its last
	// moment to give back what it holds.
	if c, ok := impl.(sdk.Cleaner); ok {
		if err := c.Cleanup(); err != nil {
			logger.Error("cleanup failed", "error", err)
			os.Exit(1)
		}
	}
	os.Exit(0)
}
