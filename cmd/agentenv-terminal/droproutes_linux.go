package main

import (
	endian "encoding/binary"
	"fmt"
	"os"
	"syscall"
	"unsafe"
)

// dropDefaultRoutes removes every IPv4 and IPv6 route with an empty
// destination prefix (a default route, in any table but the kernel's local
// one), then checks that none is left. It returns how many it removed.
func dropDefaultRoutes() (int, error) {
	removed := 0
	for _, family := range []int{syscall.AF_INET, syscall.AF_INET6} {
		routes, err := defaultRoutes(family)
		if err != nil {
			return removed, err
		}
		for _, r := range routes {
			if err := deleteRoute(r); err != nil {
				return removed, err
			}
			removed++
		}
		left, err := defaultRoutes(family)
		if err != nil {
			return removed, err
		}
		if len(left) > 0 {
			return removed, fmt.Errorf("%d default route(s) of family %d are still there after removal", len(left), family)
		}
	}
	return removed, nil
}

// defaultRoutes returns the route messages (as the kernel dumped them) of
// family's default routes.
func defaultRoutes(family int) ([][]byte, error) {
	rib, err := syscall.NetlinkRIB(syscall.RTM_GETROUTE, family)
	if err != nil {
		return nil, fmt.Errorf("listing routes: %w", os.NewSyscallError("netlink", err))
	}
	msgs, err := syscall.ParseNetlinkMessage(rib)
	if err != nil {
		return nil, fmt.Errorf("reading routes: %w", err)
	}
	var out [][]byte
	for _, m := range msgs {
		if m.Header.Type != syscall.RTM_NEWROUTE || len(m.Data) < syscall.SizeofRtMsg {
			continue
		}
		rt := (*syscall.RtMsg)(unsafe.Pointer(&m.Data[0]))
		if int(rt.Family) != family || rt.Dst_len != 0 || rt.Table == syscall.RT_TABLE_LOCAL || rt.Type != syscall.RTN_UNICAST {
			continue
		}
		out = append(out, append([]byte(nil), m.Data...))
	}
	return out, nil
}

// deleteRoute sends the kernel back a route it dumped, as RTM_DELROUTE
// (as `ip route flush` does), and waits for its answer.
func deleteRoute(body []byte) error {
	fd, err := syscall.Socket(syscall.AF_NETLINK, syscall.SOCK_RAW|syscall.SOCK_CLOEXEC, syscall.NETLINK_ROUTE)
	if err != nil {
		return os.NewSyscallError("socket", err)
	}
	defer syscall.Close(fd)
	if err := syscall.Bind(fd, &syscall.SockaddrNetlink{Family: syscall.AF_NETLINK}); err != nil {
		return os.NewSyscallError("bind", err)
	}
	msg := make([]byte, syscall.NLMSG_HDRLEN+len(body))
	endian.NativeEndian.PutUint32(msg[0:4], uint32(len(msg)))
	endian.NativeEndian.PutUint16(msg[4:6], syscall.RTM_DELROUTE)
	endian.NativeEndian.PutUint16(msg[6:8], syscall.NLM_F_REQUEST|syscall.NLM_F_ACK)
	endian.NativeEndian.PutUint32(msg[8:12], 1)
	copy(msg[syscall.NLMSG_HDRLEN:], body)
	if err := syscall.Sendto(fd, msg, 0, &syscall.SockaddrNetlink{Family: syscall.AF_NETLINK}); err != nil {
		return os.NewSyscallError("sendto", err)
	}
	buf := make([]byte, 4096)
	for {
		n, _, err := syscall.Recvfrom(fd, buf, 0)
		if err != nil {
			return os.NewSyscallError("recvfrom", err)
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return fmt.Errorf("reading the kernel's answer: %w", err)
		}
		for _, m := range msgs {
			if m.Header.Type != syscall.NLMSG_ERROR || len(m.Data) < 4 {
				continue
			}
			errno := -int32(endian.NativeEndian.Uint32(m.Data[0:4]))
			switch {
			case errno == 0:
				return nil
			case syscall.Errno(errno) == syscall.EPERM:
				return fmt.Errorf("removing a default route: %w (it needs CAP_NET_ADMIN in the namespace)", syscall.Errno(errno))
			default:
				return fmt.Errorf("removing a default route: %w", syscall.Errno(errno))
			}
		}
	}
}
