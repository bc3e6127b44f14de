package k8scluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Tests of several packages share one cluster at once: a test that
// cordons a node (Cordon) would leave another's pod pinned to that node
// Pending. The node lock, a file lock beside the cluster's state, keeps
// them apart: pinning tests hold it shared, a cordoning test exclusive.

// PinNodes is for a test that places pods on named nodes through the
// scheduler (a node selector): it holds the node lock shared until the
// test ends, so no node is cordoned meanwhile. A pod given spec.nodeName
// skips the scheduler and needs no lock.
func (c *Cluster) PinNodes(t testing.TB) {
	t.Helper()
	c.nodeLock(t, syscall.LOCK_SH)
}

// Cordon marks node unschedulable until the test ends, holding the node
// lock exclusively (it waits for pinning tests to end first); the test's
// cleanup uncordons it.
func (c *Cluster) Cordon(t testing.TB, node string) {
	t.Helper()
	c.nodeLock(t, syscall.LOCK_EX)
	set := func(ctx context.Context, on bool) error {
		patch := fmt.Sprintf(`{"spec":{"unschedulable":%t}}`, on)
		_, err := c.Client.CoreV1().Nodes().Patch(ctx, node, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Registered before the cordon: a cordon whose reply was lost is
	// undone too. Cleanups run last-registered first, so this runs before
	// the lock's release.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := set(ctx, false); err != nil {
			t.Errorf("uncordoning node %s: %v (kubectl uncordon %s)", node, err, node)
		}
	})
	if err := set(ctx, true); err != nil {
		t.Fatalf("cordoning node %s: %v", node, err)
	}
}

// nodeLock takes the node lock (how: LOCK_SH or LOCK_EX) until t ends.
func (c *Cluster) nodeLock(t testing.TB, how int) {
	t.Helper()
	dir := c.Info.StateDir
	if dir == "" { // a cluster the harness did not start
		dir = os.TempDir()
	}
	path := filepath.Join(dir, "nodes.lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatalf("the test cluster's node lock: %v", err)
	}
	t.Cleanup(func() { f.Close() }) // closing releases it
	if err := syscall.Flock(int(f.Fd()), how); err != nil {
		t.Fatalf("the test cluster's node lock %s: %v", path, err)
	}
}
