package local

import (
	"io"
	"net"
	"testing"
	"time"
)

// The port probe takes only an answer for a live env: a port proxy that
// holds the connection a while before hanging up (the engine's, finding
// nothing in an exited container under load) is not one.
func TestProbeWantsAnAnswer(t *testing.T) {
	tests := []struct {
		name  string
		serve func(net.Conn)
		want  bool
	}{
		{"an env that answers", func(c net.Conn) {
			buf := make([]byte, 512)
			_, _ = c.Read(buf)
			_, _ = io.WriteString(c, "HTTP/1.0 404 Not Found\r\n\r\n")
		}, true},
		{"a slow proxy that hangs up", func(c net.Conn) {
			time.Sleep(100 * time.Millisecond)
		}, false},
		{"a proxy that hangs up at once", func(net.Conn) {}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			go func() {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				tc.serve(c)
				c.Close()
			}()
			if got := probe(ln.Addr().String()); got != tc.want {
				t.Fatalf("probe = %v, want %v", got, tc.want)
			}
		})
	}
}
