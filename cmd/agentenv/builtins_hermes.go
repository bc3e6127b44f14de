//go:build !no_hermes

package main

import _ "github.com/agentenv/agentenv/plugins/toolformat-hermes"
