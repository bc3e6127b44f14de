//go:build !linux

package hostenv

import (
	"net"
	"strconv"
)

// connectOnce leaves every probe to the dialer here.
func connectOnce(int) (bool, error) { return false, nil }

// bindable reports whether 127.0.0.1:port can be listened on now.
func bindable(port int) bool {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	ln.Close()
	return true
}
