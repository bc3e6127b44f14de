module github.com/agentenv/agentenv/plugins/sandbox-local

go 1.26

require (
	github.com/agentenv/agentenv/sdk v0.0.0-00010101000000-000000000000
)

replace (
	github.com/agentenv/agentenv/sdk => ../../sdk
)
