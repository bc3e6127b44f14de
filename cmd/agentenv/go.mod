module github.com/agentenv/agentenv/cmd/agentenv

go 1.26

require (
	github.com/agentenv/agentenv/sdk v0.0.0-00010101000000-000000000000
	github.com/agentenv/agentenv/core v0.0.0-00010101000000-000000000000
	github.com/agentenv/agentenv/plugins/reward-mean v0.0.0-00010101000000-000000000000
	github.com/agentenv/agentenv/plugins/toolformat-hermes v0.0.0-00010101000000-000000000000
	github.com/agentenv/agentenv/plugins/toolformat-qwen3coder v0.0.0-00010101000000-000000000000
	github.com/agentenv/agentenv/plugins/sandbox-local v0.0.0-00010101000000-000000000000
)

replace (
	github.com/agentenv/agentenv/sdk => ../../sdk
	github.com/agentenv/agentenv/core => ../../core
	github.com/agentenv/agentenv/plugins/reward-mean => ../../plugins/reward-mean
	github.com/agentenv/agentenv/plugins/toolformat-hermes => ../../plugins/toolformat-hermes
	github.com/agentenv/agentenv/plugins/toolformat-qwen3coder => ../../plugins/toolformat-qwen3coder
	github.com/agentenv/agentenv/plugins/sandbox-local => ../../plugins/sandbox-local
)
