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
	"sync"
	"testing"
	"time"

	"github.com/agentenv/agentenv/sdk"
	"github.com/agentenv/agentenv/sdk/sandbox"
)

// SandboxCase says what the sandbox conformance suite deploys and runs.
type SandboxCase struct {
	// Spec is deployed. Its env must listen on $AGENTENV_PORT (or Spec.Port
	// where the sandbox gives each env its own network); it need not speak
	// MCP, since readiness is the host's business, not the sandbox's. The
	// suite adds a label and a secret variable of its own.
	Spec sandbox.Spec
	// ExecCommand is run in the sandbox and must exit 0 printing
	// ExecStdout (a substring). Nil means the sandbox does not support
	// Exec: the suite then requires sandbox.ErrExecUnsupported.
	ExecCommand []string
	ExecStdout  string
	// Restart returns a new instance of the plugin, configured as the
	// first, standing for a plugin process started after the first one
	// died. When set, the suite terminates the sandbox through it using
	// only the handle Deploy returned, as the host does after a crash.
	Restart func() sandbox.Plugin
	// PrepareCount, for a plugin that implements sandbox.Preparer, returns
	// how many times its Prepare has run for Spec.Env; the suite checks it
	// runs once however many calls arrive.
	PrepareCount func() int
	// ReadyWithin bounds how long after Deploy the endpoint may take to
	// accept TCP connections; default 30s.
	ReadyWithin time.Duration
	// GoneWithin bounds how long the endpoint may still accept connections
	// after Terminate returns; default 5s.
	GoneWithin time.Duration
}

// secretVar is the variable the suite deploys with; its value must never
// show in a handle.
const secretVar = "AGENTENV_CONFORMANCE_SECRET"

// SandboxConformance runs the sandbox conformance suite against p, served
// over real gRPC in-process: prepare once → deploy → reachable → no secret
// in the handle → listed by labels → exec with the handle → terminate with
// the handle (through a restarted instance when sc.Restart is set) → gone,
// and the errors for unknown handles.
func SandboxConformance(t *testing.T, p sandbox.Plugin, sc SandboxCase) {
	t.Helper()
	c := Sandbox(t, p)
	runChecks(t, infoChecks(c, sdk.KindSandbox))
	term := c
	if sc.Restart != nil {
		term = Sandbox(t, sc.Restart())
	}
	_, preparer := p.(sandbox.Preparer)
	runSandboxLifecycle(t, c, term, preparer, sc)
}

func nonce() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func runSandboxLifecycle(t *testing.T, c, term *sandbox.Client, preparer bool, sc SandboxCase) {
	t.Helper()
	label := map[string]string{"agentenv.conformance": nonce()}
	secret := "s3cret-" + nonce()
	spec := sc.Spec
	spec.Labels = map[string]string{}
	for k, v := range sc.Spec.Labels {
		spec.Labels[k] = v
	}
	for k, v := range label {
		spec.Labels[k] = v
	}
	spec.EnvVars = map[string]string{secretVar: secret}
	for k, v := range sc.Spec.EnvVars {
		spec.EnvVars[k] = v
	}
	if sc.GoneWithin == 0 {
		sc.GoneWithin = 5 * time.Second
	}
	if sc.ReadyWithin == 0 {
		sc.ReadyWithin = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	if preparer {
		ok := t.Run("prepare once", func(t *testing.T) {
			var wg sync.WaitGroup
			errs := make([]error, 4)
			for i := range errs {
				wg.Add(1)
				go func() { defer wg.Done(); errs[i] = c.Prepare(ctx, spec) }()
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				t.Fatalf("Prepare: %v", err)
			}
			if sc.PrepareCount != nil {
				if n := sc.PrepareCount(); n != 1 {
					t.Errorf("Prepare ran %d times for 4 calls; the SDK runs it once per env", n)
				}
			}
		})
		if !ok {
			return
		}
	}
	sb, err := c.Deploy(ctx, spec)
	if err != nil {
		t.Fatalf("Deploy: %v", err)
	}
	terminated := false
	t.Cleanup(func() {
		if !terminated {
			_ = c.Terminate(context.Background(), sb)
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
			deadline := time.Now().Add(sc.ReadyWithin)
			for {
				conn, err := net.DialTimeout("tcp", addr, time.Second)
				if err == nil {
					return conn.Close()
				}
				if time.Now().After(deadline) {
					return fmt.Errorf("endpoint %s not reachable %v after Deploy: %w", sb.Endpoint, sc.ReadyWithin, err)
				}
				time.Sleep(time.Millisecond)
			}
		}},
		{"prepared once after deploy", func(ctx context.Context) error {
			if !preparer || sc.PrepareCount == nil {
				return nil
			}
			if n := sc.PrepareCount(); n != 1 {
				return fmt.Errorf("Prepare ran %d times after Deploy; want once per env per process", n)
			}
			return nil
		}},
		{"no secret in the handle", func(ctx context.Context) error {
			if err := noSecret("Deploy", sb, secret); err != nil {
				return err
			}
			got, err := c.List(ctx, label)
			if err != nil {
				return fmt.Errorf("List: %w", err)
			}
			for _, h := range got {
				if err := noSecret("List", h, secret); err != nil {
					return err
				}
			}
			return nil
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
				_, err := c.Exec(ctx, sb, []string{"true"})
				if !errors.Is(err, sandbox.ErrExecUnsupported) {
					return fmt.Errorf("Exec on a sandbox without exec: %v, want ErrExecUnsupported", err)
				}
				return nil
			}
			r, err := term.Exec(ctx, sb, sc.ExecCommand)
			if err != nil {
				return fmt.Errorf("Exec(%q): %w", sc.ExecCommand, err)
			}
			if r.ExitCode != 0 || !strings.Contains(r.Stdout, sc.ExecStdout) {
				return fmt.Errorf("Exec(%q) = %+v, want exit 0 and stdout containing %q", sc.ExecCommand, r, sc.ExecStdout)
			}
			return nil
		}},
		{"terminate with the handle", func(ctx context.Context) error {
			// Only the handle: as a host whose plugin was restarted has.
			if err := term.Terminate(ctx, sandbox.Sandbox{ID: sb.ID, Endpoint: sb.Endpoint, Labels: sb.Labels, State: sb.State}); err != nil {
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
			if err := c.Terminate(ctx, sb); !errors.Is(err, sandbox.ErrNotFound) {
				return fmt.Errorf("second Terminate: %v, want ErrNotFound", err)
			}
			return nil
		}},
		{"explain a sandbox that is gone", func(ctx context.Context) error {
			// The host asks after a call to the env failed, when the
			// sandbox may well be gone: an answer, never an error.
			why, err := c.Explain(ctx, sb)
			if err != nil {
				return fmt.Errorf("Explain after Terminate: %w; want a sentence or \"\"", err)
			}
			if strings.Contains(why, secret) {
				return fmt.Errorf("Explain's answer holds the env's secret: %q", why)
			}
			return nil
		}},
		{"unknown handle", func(ctx context.Context) error {
			unknown := sandbox.Sandbox{ID: "no-such-sandbox"}
			if err := c.Terminate(ctx, unknown); !errors.Is(err, sandbox.ErrNotFound) {
				return fmt.Errorf("Terminate(unknown handle): %v, want ErrNotFound", err)
			}
			if err := c.Terminate(ctx, unknown); err == nil || !strings.Contains(err.Error(), "no-such-sandbox") {
				return errors.New("Terminate(unknown handle): the error does not name the id")
			}
			if sc.ExecCommand != nil {
				if _, err := c.Exec(ctx, unknown, sc.ExecCommand); !errors.Is(err, sandbox.ErrNotFound) {
					return fmt.Errorf("Exec(unknown handle): %v, want ErrNotFound", err)
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
		if !ok && (s.name == "deployed" || s.name == "terminate with the handle") {
			return
		}
	}
}

// noSecret checks that no part of a handle holds the secret.
func noSecret(from string, sb sandbox.Sandbox, secret string) error {
	parts := []string{sb.ID, sb.Endpoint, string(sb.State)}
	for k, v := range sb.Labels {
		parts = append(parts, k, v)
	}
	for _, p := range parts {
		if strings.Contains(p, secret) {
			return fmt.Errorf("the handle %s returned holds the value of the env variable %s: a handle must hold no env variable values (they may be credentials)", from, secretVar)
		}
	}
	return nil
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
