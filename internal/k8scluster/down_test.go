package k8scluster

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// Down removes the mount points Up created, and leaves one another
// program has written into since (with its parents): it is theirs.
func TestRemoveCreatedLeavesOthersFolders(t *testing.T) {
	root := t.TempDir()
	empty := filepath.Join(root, "var", "lib", "kubelet")
	used := filepath.Join(root, "run", "containerd")
	for _, d := range []string{empty, used} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(used, "s"), 0o700); err != nil { // a shim socket folder
		t.Fatal(err)
	}
	created := []string{filepath.Join(root, "var"), filepath.Join(root, "var", "lib"), empty, filepath.Join(root, "run"), used}
	othersUse, errs := removeCreated(created, hclog.NewNullLogger())
	if len(errs) > 0 {
		t.Fatalf("errors: %v", errs)
	}
	if !othersUse[used] || !othersUse[filepath.Join(root, "run")] || len(othersUse) != 2 {
		t.Errorf("in use by others: %v", othersUse)
	}
	if _, err := os.Stat(filepath.Join(root, "var")); !os.IsNotExist(err) {
		t.Errorf("the empty folders Up made are still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(used, "s")); err != nil {
		t.Errorf("another program's folder was touched: %v", err)
	}
}
