//go:build !linux

package main

import "errors"

// dropDefaultRoutes needs Linux.
func dropDefaultRoutes() (int, error) { return 0, errors.New("dropping routes needs Linux") }
