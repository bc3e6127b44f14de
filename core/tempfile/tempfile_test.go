package tempfile

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
)

// deadPID returns the id of a process that has exited and been reaped.
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

// A killed writer's temp file is removed by the next Create of the same
// name; a live writer's, another name's, and files of other naming stay.
func TestCreateRemovesOnlyStaleOnes(t *testing.T) {
	dir := t.TempDir()
	live := exec.Command("sleep", "60")
	if err := live.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { live.Process.Kill(); live.Wait() })
	dead := deadPID(t)
	files := map[string]bool{ // name: should stay
		fmt.Sprintf(".all.parquet.tmp-%d-123", dead):             false,
		fmt.Sprintf(".all.parquet.tmp-%d-456", live.Process.Pid): true,
		fmt.Sprintf(".all.parquet.tmp-%d-789", os.Getpid()):      true,
		fmt.Sprintf(".eval.parquet.tmp-%d-123", dead):            true, // another name
		".all.parquet.tmp-123456789":                             true, // the old naming: no pid to judge by
		".all.parquet.tmp-x-1":                                   true,
		fmt.Sprintf(".all.parquet.tmp-%d-", dead):                true,
		"all.parquet": true,
		fmt.Sprintf("all.parquet.tmp-%d-1", dead): true, // not hidden: not ours
	}
	for name := range files {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f, err := Create(dir, "all.parquet")
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	for name, stay := range files {
		if slices.Contains(names, name) != stay {
			t.Errorf("%s: there %v, want %v", name, !stay, stay)
		}
	}
	if want := fmt.Sprintf(".all.parquet.tmp-%d-", os.Getpid()); !slices.ContainsFunc(names, func(n string) bool {
		return len(n) > len(want) && n[:len(want)] == want && filepath.Join(dir, n) == f.Name()
	}) {
		t.Errorf("created %s, want it named %s*", f.Name(), want)
	}
}
