package hostenv

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
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
	live := map[string]bool{"a": true, "b": true}
	held := func(owner string) bool { return live[owner] }
	for _, tc := range []struct {
		name     string
		existing string // the reservation file's content before; "-" for none
		held     func(string) bool
		owner    string
		want     bool
		after    string // the file's content after
	}{
		{"free", "-", held, "a", true, "a"},
		{"held by a live owner", "b", held, "a", false, "b"},
		{"held by self is not taken twice", "a", held, "a", false, "a"},
		{"stale owner taken over", "gone", held, "a", true, "a"},
		{"stale owner with whitespace", "gone\n", held, "a", true, "a"},
		{"empty file is stale", "", held, "a", true, "a"},
		{"no Held: every reservation is stale", "b", nil, "a", true, "a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Ports{Dir: filepath.Join(t.TempDir(), "ports"), Held: tc.held}
			if tc.existing != "-" {
				if err := os.MkdirAll(p.Dir, 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p.Path(30000), []byte(tc.existing), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if got := p.Reserve(30000, tc.owner); got != tc.want {
				t.Fatalf("Reserve = %v, want %v", got, tc.want)
			}
			data, err := os.ReadFile(p.Path(30000))
			if err != nil || string(data) != tc.after {
				t.Fatalf("reservation holds %q (%v), want %q", data, err, tc.after)
			}
			info, err := os.Stat(p.Dir)
			if err != nil || info.Mode().Perm() != 0o700 {
				t.Fatalf("folder %v (%v), want mode 0700", info, err)
			}
		})
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
			_, err := os.Stat(p.Path(30001))
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
		data, err := os.ReadFile(p.Path(port))
		if err != nil || string(data) != owner {
			t.Fatalf("reservation of %d holds %q (%v), want %q", port, data, err, owner)
		}
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
