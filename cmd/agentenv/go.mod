module github.com/agentenv/agentenv/cmd/agentenv

go 1.26

require (
	github.com/agentenv/agentenv/core v0.0.0-00010101000000-000000000000
	github.com/agentenv/agentenv/plugins/reward-mean v0.0.0-00010101000000-000000000000
	github.com/agentenv/agentenv/plugins/sandbox-local v0.0.0-00010101000000-000000000000
	github.com/agentenv/agentenv/plugins/toolformat-hermes v0.0.0-00010101000000-000000000000
	github.com/agentenv/agentenv/plugins/toolformat-qwen3coder v0.0.0-00010101000000-000000000000
	github.com/agentenv/agentenv/sdk v0.0.0-00010101000000-000000000000
)

require (
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/spf13/cobra v1.10.2 // indirect
	github.com/spf13/pflag v1.0.9 // indirect
)

replace (
	github.com/agentenv/agentenv/core => ../../core
	github.com/agentenv/agentenv/plugins/reward-mean => ../../plugins/reward-mean
	github.com/agentenv/agentenv/plugins/sandbox-local => ../../plugins/sandbox-local
	github.com/agentenv/agentenv/plugins/toolformat-hermes => ../../plugins/toolformat-hermes
	github.com/agentenv/agentenv/plugins/toolformat-qwen3coder => ../../plugins/toolformat-qwen3coder
	github.com/agentenv/agentenv/sdk => ../../sdk
)
