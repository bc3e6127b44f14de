module github.com/agentenv/agentenv/examples/gridsim

go 1.26.0

require (
	github.com/agentenv/agentenv/client v0.0.0-00010101000000-000000000000
	github.com/agentenv/agentenv/core v0.0.0-00010101000000-000000000000
	github.com/agentenv/agentenv/plugins/sandbox-local v0.0.0-00010101000000-000000000000
	github.com/agentenv/agentenv/plugins/toolformat-hermes v0.0.0-00010101000000-000000000000
	github.com/agentenv/agentenv/sdk v0.0.0-00010101000000-000000000000
	github.com/hashicorp/go-hclog v1.6.3
	github.com/moby/moby/client v0.6.3
	github.com/modelcontextprotocol/go-sdk v1.8.0
)

require (
	github.com/fatih/color v1.13.0 // indirect
	github.com/golang/protobuf v1.5.4 // indirect
	github.com/google/jsonschema-go v0.4.3 // indirect
	github.com/hashicorp/go-plugin v1.8.0 // indirect
	github.com/hashicorp/yamux v0.1.2 // indirect
	github.com/mattn/go-colorable v0.1.12 // indirect
	github.com/mattn/go-isatty v0.0.17 // indirect
	github.com/oklog/run v1.1.0 // indirect
	github.com/pelletier/go-toml/v2 v2.4.3 // indirect
	github.com/santhosh-tekuri/jsonschema/v6 v6.0.3 // indirect
	github.com/segmentio/asm v1.1.3 // indirect
	github.com/segmentio/encoding v0.5.4 // indirect
	github.com/yosida95/uritemplate/v3 v3.0.2 // indirect
	golang.org/x/net v0.60.0 // indirect
	golang.org/x/oauth2 v0.37.0 // indirect
	golang.org/x/sync v0.23.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
	golang.org/x/text v0.42.0 // indirect
	golang.org/x/time v0.15.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260817212433-ac3dfec99bb1 // indirect
	google.golang.org/grpc v1.85.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)

replace (
	github.com/agentenv/agentenv/client => ../../client
	github.com/agentenv/agentenv/core => ../../core
	github.com/agentenv/agentenv/plugins/sandbox-local => ../../plugins/sandbox-local
	github.com/agentenv/agentenv/plugins/toolformat-hermes => ../../plugins/toolformat-hermes
	github.com/agentenv/agentenv/sdk => ../../sdk
)
