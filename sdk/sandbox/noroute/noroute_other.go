//go:build !linux

package noroute

import "errors"

// DropDefaultRoutes needs Linux.
func DropDefaultRoutes() (int, error) { return 0, errors.New("dropping routes needs Linux") }
