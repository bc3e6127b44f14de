package episode

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/agentenv/agentenv/core/envclient"
	"github.com/agentenv/agentenv/sdk"
)

// transportCause names why a call got no answer in words a trainer can act
// on, through the wrapping an HTTP client puts around a dial's errno.
func TestTransportCause(t *testing.T) {
	dial := func(errno syscall.Errno) error {
		op := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", errno)}
		return fmt.Errorf("calling %q: Post %q: %w", "tools/call", "http://10.0.0.1:1/mcp", op)
	}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("x: %w", sdk.ErrCrashed), "the sandbox plugin died"},
		{fmt.Errorf("x: %w", envclient.ErrTimeout), "it did not answer in time"},
		{context.DeadlineExceeded, "it did not answer in time"},
		{context.Canceled, "the call was cancelled"},
		{dial(syscall.ECONNREFUSED), "the env refused the connection (it has stopped)"},
		{dial(syscall.ECONNRESET), "the env closed the connection (it crashed or was stopped)"},
		{fmt.Errorf("read: %w", io.ErrUnexpectedEOF), "the env closed the connection (it crashed or was stopped)"},
		{dial(syscall.EHOSTUNREACH), "the env's address is unreachable (its sandbox is gone or cut off)"},
		{dial(syscall.ENETUNREACH), "the env's address is unreachable (its sandbox is gone or cut off)"},
		{fmt.Errorf("something else"), "the call failed"},
	} {
		if got := transportCause(tc.err); got != tc.want {
			t.Errorf("transportCause(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
