package hostenv

import "syscall"

// connectOnce connects to 127.0.0.1:port once and hangs up. A blocking
// connect on loopback is settled within the call (the handshake or the
// reset is sent and answered in it); a send timeout bounds it should
// the listener's backlog be full, and then done is false and the caller
// dials as usual. Four system calls, where a net.Dialer also registers
// the socket with the runtime's poller and allocates.
func connectOnce(port int) (done bool, err error) {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return false, nil
	}
	defer syscall.Close(fd)
	tv := syscall.Timeval{Usec: 100_000}
	if syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_SNDTIMEO, &tv) != nil {
		return false, nil
	}
	err = syscall.Connect(fd, &syscall.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}})
	switch err {
	case nil:
		return true, nil
	case syscall.EINPROGRESS, syscall.EAGAIN, syscall.EINTR:
		return false, nil
	}
	return true, err
}

// bindable reports whether a socket can be bound to 127.0.0.1:port now,
// with the SO_REUSEADDR an env's listener sets: four system calls, where
// net.Listen also listens, registers with the runtime's poller and
// allocates.
func bindable(port int) bool {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer syscall.Close(fd)
	if syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1) != nil {
		return false
	}
	return syscall.Bind(fd, &syscall.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}) == nil
}
