module github.com/agentenv/agentenv/sdk

go 1.26
