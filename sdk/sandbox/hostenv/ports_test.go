package hostenv

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
)

func TestPortRangeBelow(t *testing.T) {
	for _, tc := range []struct {
		name, ephemeral string
		lo, hi          int
	}{
		{"linux default", "32768\t60999\n", 20000, 32767},
		{"high start", "49152 65535", 36384, 49151},
		{"low start keeps 1024", "10000 60999", 1024, 9999},
		{"too low", "2048 60999", 20000, 32767},
		{"garbage", "x y", 20000, 32767},
		{"one field", "32768", 20000, 32767},
		{"empty", "", 20000, 32767},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lo, hi := portRangeBelow(tc.ephemeral)
			if lo != tc.lo || hi != tc.hi {
				t.Fatalf("portRangeBelow(%q) = %d-%d, want %d-%d", tc.ephemeral, lo, hi, tc.lo, tc.hi)
			}
		})
	}
}

func TestPortRangeIsBelowTheKernels(t *testing.T) {
	lo, hi := PortRange()
	if lo < 1024 || lo > hi {
		t.Fatalf("PortRange() = %d-%d", lo, hi)
	}
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		t.Skip("no /proc/sys/net/ipv4/ip_local_port_range")
	}
	if wantLo, wantHi := portRangeBelow(string(data)); lo != wantLo || hi != wantHi {
		t.Fatalf("PortRange() = %d-%d, want %d-%d", lo, hi, wantLo, wantHi)
	}
}

func TestPortsReserve(t *testing.T) {
	const old = 2 * time.Minute // older than StaleAfter's default
	live := map[string]bool{"a": true, "b": true}
	held := func(owner string) bool { return live[owner] }
	for _, tc := range []struct {
		name       string
		existing   string // the reservation before; "-" for none
		file       bool   // existing is a regular file (earlier versions' form), not a link
		age        time.Duration
		staleAfter time.Duration
		held       func(string) bool
		owner      string
		want       bool
		after      string // the reservation's owner after
	}{
		{"free", "-", false, 0, 0, held, "a", true, "a"},
		{"held by a live owner", "b", false, old, 0, held, "a", false, "b"},
		{"held by self is not taken twice", "a", false, old, 0, held, "a", false, "a"},
		{"stale owner taken over", "gone", false, old, 0, held, "a", true, "a"},
		{"no Held: every old reservation is stale", "b", false, old, 0, nil, "a", true, "a"},
		// A deploy reserves before it records its sandbox: its owner is
		// unknown to Held for a moment, and the port must stay its own.
		{"a new reservation of an unrecorded owner is kept", "gone", false, time.Second, 0, held, "a", false, "gone"},
		{"no Held: a new reservation is kept", "b", false, 0, 0, nil, "a", false, "b"},
		{"stale after StaleAfter", "gone", false, 2 * time.Second, time.Second, held, "a", true, "a"},
		{"empty owner refused", "-", false, 0, 0, held, "", false, ""},
		{"owner with a slash refused", "-", false, 0, 0, held, "../x", false, ""},
		{"file held by a live owner", "b", true, old, 0, held, "a", false, "b"},
		{"file with a stale owner taken over", "gone", true, old, 0, held, "a", true, "a"},
		{"file with whitespace", "gone\n", true, old, 0, held, "a", true, "a"},
		{"empty file is stale", "", true, old, 0, held, "a", true, "a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Ports{Dir: filepath.Join(t.TempDir(), "ports"), Held: tc.held, StaleAfter: tc.staleAfter,
				now: func() time.Time { return time.Now().Add(tc.age) }}
			if tc.existing != "-" {
				if err := os.MkdirAll(p.Dir, 0o700); err != nil {
					t.Fatal(err)
				}
				write := func() error { return os.Symlink(tc.existing, p.Path(30000)) }
				if tc.file {
					write = func() error { return os.WriteFile(p.Path(30000), []byte(tc.existing), 0o600) }
				}
				if err := write(); err != nil {
					t.Fatal(err)
				}
			}
			if got := p.Reserve(30000, tc.owner); got != tc.want {
				t.Fatalf("Reserve = %v, want %v", got, tc.want)
			}
			if got, err := p.Owner(30000); got != tc.after || (err != nil) != (tc.after == "") {
				t.Fatalf("reservation held by %q (%v), want %q", got, err, tc.after)
			}
			if tc.after == "" {
				return
			}
			info, err := os.Stat(p.Dir)
			if err != nil || info.Mode().Perm() != 0o700 {
				t.Fatalf("folder %v (%v), want mode 0700", info, err)
			}
		})
	}
}

// TestPortsTakeOverOnce: deploys racing for one stale reservation: one
// takes it, and the others leave it to that one (none removes the new
// reservation to make its own).
func TestPortsTakeOverOnce(t *testing.T) {
	p := Ports{Dir: t.TempDir(), Held: func(owner string) bool { return owner != "gone" },
		now: func() time.Time { return time.Now().Add(2 * time.Minute) }}
	if err := os.Symlink("gone", p.Path(30000)); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	won := make(chan string, 16)
	for i := range 16 {
		wg.Go(func() {
			if owner := "o" + strconv.Itoa(i); p.Reserve(30000, owner) {
				won <- owner
			}
		})
	}
	wg.Wait()
	close(won)
	var winners []string
	for w := range won {
		winners = append(winners, w)
	}
	if len(winners) != 1 {
		t.Fatalf("%d deploys took the port over (%v), want 1", len(winners), winners)
	}
	if got, err := p.Owner(30000); err != nil || got != winners[0] {
		t.Fatalf("reservation held by %q (%v), want the winner %q", got, err, winners[0])
	}
}

func TestPortsReserveUnusableFolder(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if (Ports{Dir: filepath.Join(file, "ports")}).Reserve(30000, "a") {
		t.Fatal("Reserve succeeded under a file")
	}
}

func TestPortsRelease(t *testing.T) {
	for _, tc := range []struct {
		name, holder, releaser string
		kept                   bool
	}{
		{"own reservation", "a", "a", false},
		{"another's reservation", "b", "a", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Ports{Dir: t.TempDir()}
			if !p.Reserve(30001, tc.holder) {
				t.Fatal("Reserve failed")
			}
			p.Release(30001, tc.releaser)
			_, err := os.Lstat(p.Path(30001))
			if kept := err == nil; kept != tc.kept {
				t.Fatalf("reservation kept = %v, want %v", kept, tc.kept)
			}
		})
	}
	(Ports{Dir: t.TempDir()}).Release(30002, "a") // nothing reserved: no panic, no error
}

func TestPortsAlloc(t *testing.T) {
	p := Ports{Dir: t.TempDir(), Held: func(string) bool { return true }}
	lo, hi := PortRange()
	seen := map[int]bool{}
	for i := range 20 {
		owner := "sb-" + strconv.Itoa(i)
		port, err := p.Alloc(owner)
		if err != nil {
			t.Fatal(err)
		}
		if port < lo || port > hi {
			t.Fatalf("port %d outside %d-%d", port, lo, hi)
		}
		if seen[port] {
			t.Fatalf("port %d handed out twice", port)
		}
		seen[port] = true
		if got, err := p.Owner(port); err != nil || got != owner {
			t.Fatalf("reservation of %d held by %q (%v), want %q", port, got, err, owner)
		}
	}
}

// TestBindableSeesListeners: a port some socket listens on is not
// bindable, so Alloc never hands it out, reserved or not; once closed it is.
func TestBindableSeesListeners(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	taken := ln.Addr().(*net.TCPAddr).Port
	if bindable(taken) {
		t.Fatalf("port %d, listened on, counts as bindable", taken)
	}
	ln.Close()
	if !bindable(taken) {
		t.Fatalf("port %d, closed, counts as taken", taken)
	}
}

// TestPortsReleaseReadsFiles: a reservation an earlier version wrote as a
// file is released by its owner.
func TestPortsReleaseReadsFiles(t *testing.T) {
	p := Ports{Dir: t.TempDir()}
	if err := os.WriteFile(p.Path(30003), []byte("a"), 0o600); err != nil {
		t.Fatal(err)
	}
	p.Release(30003, "b")
	if _, err := os.Lstat(p.Path(30003)); err != nil {
		t.Fatalf("another owner's file reservation removed: %v", err)
	}
	p.Release(30003, "a")
	if _, err := os.Lstat(p.Path(30003)); err == nil {
		t.Fatal("the owner's file reservation kept")
	}
}

func TestPortsAllocUnusableFolder(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if port, err := (Ports{Dir: file}).Alloc("a"); err == nil {
		t.Fatalf("Alloc gave port %d with no usable folder", port)
	}
}

func TestHeldWhileExists(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "live.json"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	held := HeldWhileExists(func(owner string) string { return filepath.Join(dir, owner+".json") })
	for _, tc := range []struct {
		owner string
		want  bool
	}{
		{"live", true},
		{"gone", false},
		{"", false},
	} {
		if got := held(tc.owner); got != tc.want {
			t.Errorf("held(%q) = %v, want %v", tc.owner, got, tc.want)
		}
	}
	// A state file that cannot be checked (ENOTDIR: its folder is a file)
	// counts as held: a port is never taken over on a doubt.
	odd := HeldWhileExists(func(string) string { return filepath.Join(dir, "live.json", "x") })
	if !odd("any") {
		t.Error("an unreadable state counted as gone")
	}
}
