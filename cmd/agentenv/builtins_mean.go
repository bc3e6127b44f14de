//go:build !no_mean

package main

import _ "github.com/agentenv/agentenv/plugins/reward-mean"
