package runtime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentenv/agentenv/core/testenv/testenvbuild"
	"github.com/agentenv/agentenv/sdk/sandbox"
	"github.com/agentenv/agentenv/sdk/toolformat"
)

// probedSandbox is a sandbox that Open only asks whether it runs
// commands: exec says how its Exec answers; it deploys nothing.
type probedSandbox struct {
	exec  error
	asked []sandbox.Sandbox
}

func (p *probedSandbox) Deploy(context.Context, sandbox.Spec) (sandbox.Sandbox, error) {
	return sandbox.Sandbox{}, errors.New("this test deploys nothing")
}
func (p *probedSandbox) Terminate(context.Context, sandbox.Sandbox) error { return nil }
func (p *probedSandbox) List(context.Context, map[string]string) ([]sandbox.Sandbox, error) {
	return nil, nil
}
func (p *probedSandbox) Exec(_ context.Context, sb sandbox.Sandbox, _ []string) (sandbox.ExecResult, error) {
	p.asked = append(p.asked, sb)
	return sandbox.ExecResult{}, p.exec
}

// noParser stands in for the tool format Open looks up; this test plays
// no episode.
type noParser struct{}

func (noParser) Parse(context.Context, string, []toolformat.Tool) (toolformat.Parsed, error) {
	return toolformat.Parsed{}, errors.New("this test parses nothing")
}

// verifyBundle is the test bundle (testBundle) with its one task scored
// by verifier alone.
func verifyBundle(t *testing.T, verifier string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "cmdbundle")
	if err := testenvbuild.WriteBundle(dir, testenvBin, ""); err != nil {
		t.Fatal(err)
	}
	task := `[
  {"id": "env", "type": "deploy_env", "env": "testenv"},
  {"id": "play", "type": "prompt_agent", "prompt": "Reach the target."},
  ` + verifier + `
]`
	if err := os.WriteFile(filepath.Join(dir, "tasks", "puzzle.json"), []byte(task), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// A sandbox that cannot run commands is refused at Open for a bundle that
// verifies with commands, naming the sandbox, the tasks and what to do;
// one that can, or a bundle that needs no command, opens.
func TestOpenRefusesCommandVerifiersWithoutExec(t *testing.T) {
	const (
		command = `{"id": "check", "type": "verify_command", "command": ["true"]}`
		tool    = `{"id": "grade", "type": "verify_tool", "tool": "grade"}`
	)
	unsupported := fmt.Errorf("sandbox %s cannot run commands: %w", execProbe.ID, sandbox.ErrExecUnsupported)
	notFound := fmt.Errorf("no sandbox %s: %w", execProbe.ID, sandbox.ErrNotFound)
	for _, tc := range []struct {
		name     string
		verifier string
		exec     error
		want     string // "" = opens
		probed   bool
	}{
		{"no exec, command verifier", command, unsupported, `sandbox "probed" cannot run commands, and 1 task(s) of bundle cmdbundle verify with verify_command steps (puzzle)`, true},
		{"exec, command verifier", command, notFound, "", true},
		{"other answer, command verifier", command, errors.New("the cluster is unreachable"), "", true},
		{"no exec, tool verifier", tool, unsupported, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sb := &probedSandbox{exec: tc.exec}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			rt, err := Open(ctx, verifyBundle(t, tc.verifier), Options{
				Sandbox: "probed", SandboxDriver: sb, ToolFormat: "hermes",
				ToolFormats: func(string) (toolformat.Parser, error) { return noParser{}, nil },
			})
			if err == nil {
				_ = rt.Close(ctx)
			}
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Open: %v, want it to open", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, sandbox.ErrExecUnsupported)):
				t.Fatalf("Open: %v, want an error with %q wrapping ErrExecUnsupported", err, tc.want)
			}
			if probed := len(sb.asked) > 0; probed != tc.probed {
				t.Fatalf("Exec asked %v, want asked %v", sb.asked, tc.probed)
			}
		})
	}
}
