//go:build !no_ecs

package main

import _ "github.com/agentenv/agentenv/plugins/sandbox-ecs"
