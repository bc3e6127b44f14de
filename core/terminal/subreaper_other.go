//go:build !linux

package terminal

import "errors"

func becomeSubreaper() error { return errors.New("only Linux has child subreapers") }
