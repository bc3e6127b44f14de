package runtime

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/agentenv/agentenv/sdk/sandbox"
)

// ServerID is a stable id for a server of this bundle on this address: the
// same after a restart, different for another bundle or port, so two
// servers on one machine never reap each other's sandboxes.
func ServerID(bundleDir, addr string) (string, error) {
	abs, err := filepath.Abs(bundleDir)
	if err != nil {
		return "", fmt.Errorf("server id: %w", err)
	}
	sum := sha256.Sum256([]byte(abs + "\x00" + addr))
	return hex.EncodeToString(sum[:8]), nil
}

// Reaper is what Reap needs of a sandbox.
type Reaper interface {
	sandbox.Lister
	sandbox.Terminator
}

// Reap terminates every sandbox labelled with sandbox.LabelServer=serverID: those
// an earlier instance, killed before it could tear down, left behind. Call
// it before serving. It returns how many it terminated; a sandbox already
// gone is not an error.
func Reap(ctx context.Context, r Reaper, serverID string) (int, error) {
	left, err := r.List(ctx, map[string]string{sandbox.LabelServer: serverID})
	if err != nil {
		return 0, fmt.Errorf("reap: list sandboxes of server %s: %w", serverID, err)
	}
	n := 0
	var errs []error
	for _, sb := range left {
		if err := r.Terminate(ctx, sb); err != nil && !errors.Is(err, sandbox.ErrNotFound) {
			errs = append(errs, fmt.Errorf("reap: terminate sandbox %s: %w", sb.ID, err))
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}
