package runtime

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/agentenv/agentenv/core/bundle"
	"github.com/agentenv/agentenv/sdk/sandbox"
)

// execProbe is the handle checkExec asks a sandbox to run a command in:
// one no sandbox made.
var execProbe = sandbox.Sandbox{ID: "agentenv-exec-probe"}

// checkExec refuses a bundle whose tasks verify with commands when the
// sandbox cannot run them, at Open rather than as a failed score in every
// episode. The sandbox is asked to run a command in a handle it never
// made: one that runs commands answers ErrNotFound (the SDK's conformance
// suite holds sandboxes to it), one that cannot, ErrExecUnsupported. Any
// other answer lets the bundle through: the episodes then say what failed.
func checkExec(ctx context.Context, d sandbox.Driver, name string, b *bundle.Bundle) error {
	var tasks []string
	for _, t := range b.Tasks {
		for _, s := range t.Steps {
			if s.Type == bundle.StepVerifyCommand {
				tasks = append(tasks, t.ID)
				break
			}
		}
	}
	if len(tasks) == 0 {
		return nil
	}
	_, err := d.Exec(ctx, execProbe, []string{"true"})
	if !errors.Is(err, sandbox.ErrExecUnsupported) {
		return nil
	}
	shown := tasks
	if len(shown) > 3 {
		shown = append(shown[:3:3], fmt.Sprintf("and %d more", len(tasks)-3))
	}
	return fmt.Errorf("sandbox %q cannot run commands, and %d task(s) of bundle %s verify with verify_command steps (%s): serve them with a sandbox that can (local, docker, k8s), or score them with verify_tool steps: %w",
		name, len(tasks), b.Name, strings.Join(shown, ", "), err)
}
