package sdktest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/agentenv/agentenv/sdk"
	"github.com/agentenv/agentenv/sdk/sandbox"
)

// SandboxCase says what the sandbox conformance suite deploys and runs.
type SandboxCase struct {
	// Spec is deployed; its env must listen on Spec.Port (or the port the
	// sandbox hands it) so the endpoint accepts TCP connections. The suite
	// adds a unique label of its own.
	Spec sandbox.Spec
	// ExecCommand is run in the sandbox and must exit 0 printing
	// ExecStdout (a substring). Nil means the sandbox does not support
	// Exec: the suite then requires sandbox.ErrExecUnsupported.
	ExecCommand []string
	ExecStdout  string
	// GoneWithin bounds how long the endpoint may still accept connections
	// after Terminate returns; default 5s.
	GoneWithin time.Duration
}

// SandboxConformance runs the sandbox conformance suite against p, served
// over real gRPC in-process: deploy → reachable → exec → listed by labels
// → terminate → gone, and the errors for unknown ids.
func SandboxConformance(t *testing.T, p sandbox.Plugin, sc SandboxCase) {
	t.Helper()
	c := Sandbox(t, p)
	runChecks(t, infoChecks(c, sdk.KindSandbox))
	runSandboxLifecycle(t, c, sc)
}

func runSandboxLifecycle(t *testing.T, c sandbox.Driver, sc SandboxCase) {
	t.Helper()
	var nonce [6]byte
	_, _ = rand.Read(nonce[:])
	label := map[string]string{"agentenv.conformance": hex.EncodeToString(nonce[:])}
	spec := sc.Spec
	spec.Labels = map[string]string{}
	for k, v := range sc.Spec.Labels {
		spec.Labels[k] = v
	}
	for k, v := range label {
		spec.Labels[k] = v
	}
	if sc.GoneWithin == 0 {
		sc.GoneWithin = 5 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	sb, err := c.Deploy(ctx, spec)
	if err != nil {
		t.Fatalf("Deploy: %v", err)
	}
	terminated := false
	t.Cleanup(func() {
		if !terminated {
			_ = c.Terminate(context.Background(), sb.ID)
		}
	})
	steps := []check{
		{"deployed", func(ctx context.Context) error {
			if sb.ID == "" {
				return errors.New("Deploy returned an empty id")
			}
			addr, err := endpointAddr(sb.Endpoint)
			if err != nil {
				return err
			}
			conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
			if err != nil {
				return fmt.Errorf("endpoint %s not reachable after Deploy: %w", sb.Endpoint, err)
			}
			return conn.Close()
		}},
		{"listed by labels", func(ctx context.Context) error {
			got, err := c.List(ctx, label)
			if err != nil {
				return fmt.Errorf("List: %w", err)
			}
			if len(got) != 1 || got[0].ID != sb.ID {
				return fmt.Errorf("List(%v) = %+v, want just %s", label, got, sb.ID)
			}
			for k, v := range spec.Labels {
				if got[0].Labels[k] != v {
					return fmt.Errorf("List: sandbox label %s=%q, want %q", k, got[0].Labels[k], v)
				}
			}
			other, err := c.List(ctx, map[string]string{"agentenv.conformance": "no-such-value"})
			if err != nil {
				return fmt.Errorf("List: %w", err)
			}
			if len(other) != 0 {
				return fmt.Errorf("List with a label nothing has returned %d sandboxes", len(other))
			}
			return nil
		}},
		{"exec", func(ctx context.Context) error {
			if sc.ExecCommand == nil {
				_, err := c.Exec(ctx, sb.ID, []string{"true"})
				if !errors.Is(err, sandbox.ErrExecUnsupported) {
					return fmt.Errorf("Exec on a sandbox without exec: %v, want ErrExecUnsupported", err)
				}
				return nil
			}
			r, err := c.Exec(ctx, sb.ID, sc.ExecCommand)
			if err != nil {
				return fmt.Errorf("Exec(%q): %w", sc.ExecCommand, err)
			}
			if r.ExitCode != 0 || !strings.Contains(r.Stdout, sc.ExecStdout) {
				return fmt.Errorf("Exec(%q) = %+v, want exit 0 and stdout containing %q", sc.ExecCommand, r, sc.ExecStdout)
			}
			return nil
		}},
		{"terminate", func(ctx context.Context) error {
			if err := c.Terminate(ctx, sb.ID); err != nil {
				return fmt.Errorf("Terminate: %w", err)
			}
			terminated = true
			got, err := c.List(ctx, label)
			if err != nil {
				return fmt.Errorf("List after Terminate: %w", err)
			}
			if len(got) != 0 {
				return fmt.Errorf("List after Terminate still has %+v", got)
			}
			addr, _ := endpointAddr(sb.Endpoint)
			deadline := time.Now().Add(sc.GoneWithin)
			for {
				conn, err := net.DialTimeout("tcp", addr, time.Second)
				if err != nil {
					return nil
				}
				_ = conn.Close()
				if time.Now().After(deadline) {
					return fmt.Errorf("endpoint %s still accepts connections %v after Terminate", sb.Endpoint, sc.GoneWithin)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}},
		{"terminate twice", func(ctx context.Context) error {
			if err := c.Terminate(ctx, sb.ID); !errors.Is(err, sandbox.ErrNotFound) {
				return fmt.Errorf("second Terminate: %v, want ErrNotFound", err)
			}
			return nil
		}},
		{"unknown id", func(ctx context.Context) error {
			if err := c.Terminate(ctx, "no-such-sandbox"); !errors.Is(err, sandbox.ErrNotFound) {
				return fmt.Errorf("Terminate(unknown id): %v, want ErrNotFound", err)
			}
			if err := c.Terminate(ctx, "no-such-sandbox"); err == nil || !strings.Contains(err.Error(), "no-such-sandbox") {
				return errors.New("Terminate(unknown id): the error does not name the id")
			}
			if sc.ExecCommand != nil {
				if _, err := c.Exec(ctx, "no-such-sandbox", sc.ExecCommand); !errors.Is(err, sandbox.ErrNotFound) {
					return fmt.Errorf("Exec(unknown id): %v, want ErrNotFound", err)
				}
			}
			return nil
		}},
	}
	for _, s := range steps {
		ok := t.Run(s.name, func(t *testing.T) {
			if err := s.run(ctx); err != nil {
				t.Error(err)
			}
		})
		if !ok && (s.name == "deployed" || s.name == "terminate") {
			return
		}
	}
}

func endpointAddr(endpoint string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("endpoint %q is not a URL with a host: %v", endpoint, err)
	}
	if u.Port() == "" {
		return "", fmt.Errorf("endpoint %q has no port", endpoint)
	}
	return u.Host, nil
}
