module github.com/agentenv/agentenv/bench

go 1.26.0

require (
	github.com/agentenv/agentenv/client v0.0.0-00010101000000-000000000000
	github.com/agentenv/agentenv/core v0.0.0-00010101000000-000000000000
	github.com/agentenv/agentenv/plugins/reward-mean v0.0.0-00010101000000-000000000000
	github.com/agentenv/agentenv/plugins/sandbox-local v0.0.0-00010101000000-000000000000
	github.com/agentenv/agentenv/sdk v0.0.0-00010101000000-000000000000
	github.com/gorilla/websocket v1.5.3
	github.com/hashicorp/go-hclog v1.6.3
	github.com/moby/moby/api v1.57.0
	github.com/moby/moby/client v0.6.3
)

require (
	github.com/fatih/color v1.13.0 // indirect
	github.com/golang/protobuf v1.5.4 // indirect
	github.com/hashicorp/go-plugin v1.8.0 // indirect
	github.com/hashicorp/yamux v0.1.2 // indirect
	github.com/mattn/go-colorable v0.1.12 // indirect
	github.com/mattn/go-isatty v0.0.17 // indirect
	github.com/oklog/run v1.1.0 // indirect
	github.com/santhosh-tekuri/jsonschema/v6 v6.0.3 // indirect
	golang.org/x/net v0.60.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
	golang.org/x/text v0.42.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260817212433-ac3dfec99bb1 // indirect
	google.golang.org/grpc v1.85.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)

replace (
	github.com/agentenv/agentenv/client => ../client
	github.com/agentenv/agentenv/core => ../core
	github.com/agentenv/agentenv/plugins/reward-mean => ../plugins/reward-mean
	github.com/agentenv/agentenv/plugins/sandbox-local => ../plugins/sandbox-local
	github.com/agentenv/agentenv/sdk => ../sdk
)
