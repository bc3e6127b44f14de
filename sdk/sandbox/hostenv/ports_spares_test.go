//go:build linux

package hostenv

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// testSpares keeps spares as the plugins do: renamed aside in their folder.
type testSpares struct {
	paths []string
	n     int
}

func (s *testSpares) Take(dir string) (string, bool) {
	if len(s.paths) == 0 {
		s.n++
		path := filepath.Join(dir, ".spare-"+strconv.Itoa(s.n))
		if os.MkdirAll(dir, 0o700) != nil || os.WriteFile(path, nil, 0o600) != nil {
			return "", false
		}
		return path, true
	}
	p := s.paths[len(s.paths)-1]
	s.paths = s.paths[:len(s.paths)-1]
	return p, true
}

func (s *testSpares) Put(path string) bool {
	s.n++
	name := filepath.Join(filepath.Dir(path), ".spare-"+strconv.Itoa(s.n))
	if os.Rename(path, name) != nil {
		return false
	}
	s.paths = append(s.paths, name)
	return true
}

// With Spares a reservation is a spare file renamed into place, holding
// its owner, and a released one goes back to the pool: no file made or
// removed. A port held by a live owner is never written over, and the
// spare it was to get stays in the pool.
func TestPortsReserveWithSpares(t *testing.T) {
	dir := t.TempDir()
	spares := &testSpares{}
	live := map[string]bool{}
	p := Ports{Dir: dir, Spares: spares, Held: func(o string) bool { return live[o] }}
	spare := filepath.Join(dir, "first")
	if err := os.WriteFile(spare, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	spares.paths = []string{spare}
	before, _ := os.Stat(spare)

	if !p.Reserve(20001, "a") {
		t.Fatal("Reserve(20001, a) = false")
	}
	live["a"] = true
	info, err := os.Lstat(p.Path(20001))
	if err != nil || !info.Mode().IsRegular() || !os.SameFile(before, info) {
		t.Fatalf("the reservation is not the spare, renamed: %v, %v", info, err)
	}
	if owner, err := p.Owner(20001); owner != "a" || err != nil {
		t.Fatalf("Owner = %q, %v", owner, err)
	}
	if len(spares.paths) != 0 {
		t.Fatalf("spares left: %v", spares.paths)
	}

	// Another owner's spare never goes over a live reservation.
	other := filepath.Join(dir, "second")
	if err := os.WriteFile(other, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	spares.paths = []string{other}
	if p.Reserve(20001, "b") {
		t.Fatal("Reserve(20001, b) took a live owner's port")
	}
	if owner, _ := p.Owner(20001); owner != "a" {
		t.Fatalf("Owner = %q after b's try, want a", owner)
	}
	if len(spares.paths) != 1 {
		t.Fatalf("b's spare was not kept: %v", spares.paths)
	}

	p.Release(20001, "b") // not b's: kept
	if owner, _ := p.Owner(20001); owner != "a" {
		t.Fatalf("Owner = %q after b's release, want a", owner)
	}
	p.Release(20001, "a")
	if _, err := os.Lstat(p.Path(20001)); !os.IsNotExist(err) {
		t.Fatalf("the released reservation is still there: %v", err)
	}
	if len(spares.paths) != 2 {
		t.Fatalf("the released reservation was not kept as a spare: %v", spares.paths)
	}
	kept, _ := os.Stat(spares.paths[1])
	if !os.SameFile(before, kept) {
		t.Fatal("the spare kept is not the released reservation")
	}

	// A link (takeOver's, earlier versions') is removed, never kept: it
	// could not take another owner.
	if err := os.Symlink("c", p.Path(20002)); err != nil {
		t.Fatal(err)
	}
	p.Release(20002, "c")
	if _, err := os.Lstat(p.Path(20002)); !os.IsNotExist(err) || len(spares.paths) != 2 {
		t.Fatalf("a released link: %v, spares %v", err, spares.paths)
	}
}
