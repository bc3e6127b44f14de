//go:build !no_local

package main

import _ "github.com/agentenv/agentenv/plugins/sandbox-local"
