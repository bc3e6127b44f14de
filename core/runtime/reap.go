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

// PodServerID is the server id of agentenv in a Kubernetes pod: the pod's
// name, from the downward API variables POD_NAME and POD_UID
// (deploy/kubernetes sets both), so each replica of a Deployment has an id
// of its own and reaps only its own envs, where ServerID (bundle and
// address, the same in every replica) would make them reap each other's.
// "" outside a pod, or for a name no server id can be.
func PodServerID(getenv func(string) string) string {
	name := getenv("POD_NAME")
	if name == "" || getenv("POD_UID") == "" || !validServerID.MatchString(name) {
		return ""
	}
	return name
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

// ReapDead terminates the sandboxes of every server that no longer runs:
// those of self (the server id starting now: any sandbox of it is an
// earlier instance's), those of servers whose claim in dir nobody holds
// (killed without tearing down), and, with all, those of servers unknown
// to dir and those carrying no server label. Sandboxes of running servers
// are never touched. It returns how many it terminated, by server id ("" for
// unlabelled ones).
func ReapDead(ctx context.Context, r Reaper, dir, self string, all bool) (map[string]int, error) {
	live, err := r.List(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("reap: list sandboxes: %w", err)
	}
	states := map[string]ServerState{}
	reaped := map[string]int{}
	failed := map[string]bool{}
	var errs []error
	for _, sb := range live {
		id := sb.Labels[sandbox.LabelServer]
		st, seen := states[id]
		if !seen {
			switch {
			case id == "":
				st = ServerUnknown
			case id == self:
				st = ServerDead
			default:
				if st, err = State(dir, id); err != nil {
					errs = append(errs, err)
					st = ServerRunning // when in doubt, leave it
				}
			}
			states[id] = st
		}
		if st == ServerRunning || st == ServerUnknown && !all {
			continue
		}
		if err := r.Terminate(ctx, sb); err != nil && !errors.Is(err, sandbox.ErrNotFound) {
			errs = append(errs, fmt.Errorf("reap: terminate sandbox %s of server %s: %w", sb.ID, id, err))
			failed[id] = true
			continue
		}
		reaped[id]++
	}
	// Dead servers whose sandboxes are all gone need their claims no more.
	ids, err := ServerIDs(dir)
	if err != nil {
		errs = append(errs, err)
	}
	for _, id := range ids {
		if st, err := State(dir, id); err == nil && st == ServerDead && id != self && !failed[id] {
			forget(dir, id)
		}
	}
	return reaped, errors.Join(errs...)
}
