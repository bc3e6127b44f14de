//go:build !no_k8s

package main

import _ "github.com/agentenv/agentenv/plugins/sandbox-k8s"
