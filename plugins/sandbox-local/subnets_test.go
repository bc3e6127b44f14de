package local

import (
	"net/netip"
	"strings"
	"testing"
)

func TestSubnetPool(t *testing.T) {
	p, err := newSubnetPool("10.213.0.0/16", 28)
	if err != nil {
		t.Fatal(err)
	}
	if p.capacity() != 4096 {
		t.Fatalf("capacity %d, want 4096 (the default must hold 4,000 live episodes)", p.capacity())
	}
	tests := []struct {
		i    int
		want string
	}{{0, "10.213.0.0/28"}, {1, "10.213.0.16/28"}, {16, "10.213.1.0/28"}, {4095, "10.213.255.240/28"}}
	for _, tc := range tests {
		if got := p.block(tc.i).String(); got != tc.want {
			t.Errorf("block(%d) = %s, want %s", tc.i, got, tc.want)
		}
		if i, ok := p.index(netip.MustParsePrefix(tc.want)); !ok || i != tc.i {
			t.Errorf("index(%s) = %d %v, want %d", tc.want, i, ok, tc.i)
		}
	}
	for _, s := range []string{"10.213.0.0/24", "10.214.0.0/28", "10.213.0.8/28"} {
		if _, ok := p.index(netip.MustParsePrefix(s)); ok {
			t.Errorf("index(%s) is a block of the pool", s)
		}
	}
}

func TestSubnetPoolTakeReleaseAndForeign(t *testing.T) {
	p, err := newSubnetPool("192.168.64.0/24", 28) // 16 blocks
	if err != nil {
		t.Fatal(err)
	}
	p.markUsed(netip.MustParsePrefix("192.168.64.32/27")) // blocks 2 and 3
	p.markUsed(netip.MustParsePrefix("192.168.64.80/30")) // inside block 5
	p.markUsed(netip.MustParsePrefix("172.17.0.0/16"))    // elsewhere: no effect
	if p.inUse() != 3 {
		t.Fatalf("inUse %d after marking foreign networks, want 3", p.inUse())
	}
	var got []string
	for range 13 {
		pfx, err := p.take()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, pfx.String())
	}
	for _, g := range got {
		if g == "192.168.64.32/28" || g == "192.168.64.48/28" || g == "192.168.64.80/28" {
			t.Errorf("took %s, which a foreign network overlaps", g)
		}
	}
	if _, err := p.take(); err == nil || !strings.Contains(err.Error(), "used up") || !strings.Contains(err.Error(), "192.168.64.0/24") {
		t.Fatalf("take on a full pool: %v", err)
	}
	p.release(netip.MustParsePrefix(got[4]))
	p.release(netip.MustParsePrefix("10.0.0.0/28")) // not ours: ignored
	again, err := p.take()
	if err != nil || again.String() != got[4] {
		t.Fatalf("after a release took %s %v, want %s", again, err, got[4])
	}
	// A foreign network larger than the whole base fills it.
	q, _ := newSubnetPool("10.9.8.0/26", 28)
	q.markUsed(netip.MustParsePrefix("10.0.0.0/8"))
	if _, err := q.take(); err == nil {
		t.Fatal("took a subnet inside a foreign /8")
	}
}

func TestSubnetPoolForgetAll(t *testing.T) {
	p, _ := newSubnetPool("10.9.8.0/27", 28) // 2 blocks
	p.markUsed(netip.MustParsePrefix("10.9.8.0/27"))
	if _, err := p.take(); err == nil {
		t.Fatal("took from a full pool")
	}
	p.forgetAll()
	if _, err := p.take(); err != nil || p.inUse() != 1 {
		t.Fatalf("after forgetAll: %v, %d in use", err, p.inUse())
	}
}
