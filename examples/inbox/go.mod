module github.com/agentenv/agentenv/examples/inbox

go 1.26.0

require (
	github.com/hashicorp/go-hclog v1.6.3
	github.com/modelcontextprotocol/go-sdk v1.8.0
)

require (
	github.com/agentenv/agentenv/client v0.0.0-00010101000000-000000000000
	github.com/fatih/color v1.13.0 // indirect
	github.com/google/jsonschema-go v0.4.3 // indirect
	github.com/gorilla/websocket v1.5.3 // indirect
	github.com/mattn/go-colorable v0.1.12 // indirect
	github.com/mattn/go-isatty v0.0.14 // indirect
	github.com/segmentio/asm v1.1.3 // indirect
	github.com/segmentio/encoding v0.5.4 // indirect
	github.com/yosida95/uritemplate/v3 v3.0.2 // indirect
	golang.org/x/oauth2 v0.35.0 // indirect
	golang.org/x/sync v0.20.0 // indirect
	golang.org/x/sys v0.41.0 // indirect
	golang.org/x/time v0.15.0 // indirect
)

replace github.com/agentenv/agentenv/client => ../../client
