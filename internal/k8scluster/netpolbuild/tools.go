//go:build tools

// Package tools pins kube-router, whose network policy controller enforces
// NetworkPolicy in the test cluster; its own go.mod keeps it out of the
// main module and go.work.
package tools

import (
	_ "github.com/cloudnativelabs/kube-router/v2/cmd/kube-router"
)
