//go:build !no_qwen3_coder

package main

import _ "github.com/agentenv/agentenv/plugins/toolformat-qwen3coder"
