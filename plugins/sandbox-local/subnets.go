package local

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"sync"
)

// subnetPool hands out the subnets of Docker-mode sandbox networks from a
// base prefix of the plugin's own (subnet_base, split into /subnet_size
// blocks), so sandboxes never draw on the engine's default address pools:
// those hold about 30 bridge networks, this one thousands. A subnet is
// free again once its network is removed.
//
// The engine is the arbiter between processes: a subnet another process
// (or program) took shows up as used when the pool is loaded from the
// engine's networks, or is refused by the engine as overlapping, and the
// pool then marks it and moves on.
type subnetPool struct {
	base netip.Prefix
	size int // prefix length of each block
	n    int // blocks in base

	mu     sync.Mutex
	used   map[int]bool
	cursor int // where the next search starts: freed blocks are reused last
}

// maxSubnets bounds the pool, so its bookkeeping stays small.
const maxSubnets = 1 << 20

func newSubnetPool(base string, size int) (*subnetPool, error) {
	pfx, err := netip.ParsePrefix(base)
	if err != nil {
		return nil, fmt.Errorf("subnet_base %q: %w", base, err)
	}
	if !pfx.Addr().Is4() {
		return nil, fmt.Errorf("subnet_base %q: give an IPv4 prefix, like 10.213.0.0/16", base)
	}
	if pfx != pfx.Masked() {
		return nil, fmt.Errorf("subnet_base %q: the address has bits set past /%d; did you mean %s?", base, pfx.Bits(), pfx.Masked())
	}
	if size < pfx.Bits() || size > 29 {
		return nil, fmt.Errorf("subnet_size %d: must be between the base's /%d and /29 (a network needs a gateway and a container address)", size, pfx.Bits())
	}
	if size-pfx.Bits() > 20 {
		return nil, fmt.Errorf("subnet_size %d with subnet_base %s makes more than %d networks; use a smaller base or a larger block", size, base, maxSubnets)
	}
	return &subnetPool{base: pfx, size: size, n: 1 << (size - pfx.Bits()), used: map[int]bool{}}, nil
}

// capacity is how many networks the pool holds.
func (p *subnetPool) capacity() int { return p.n }

// block is the i-th subnet of the pool.
func (p *subnetPool) block(i int) netip.Prefix {
	return netip.PrefixFrom(u32ToAddr(addrToU32(p.base.Addr())+uint32(i)<<(32-p.size)), p.size)
}

// index is the block of the pool pfx is, and whether it is one exactly.
func (p *subnetPool) index(pfx netip.Prefix) (int, bool) {
	if pfx.Bits() != p.size || !p.base.Contains(pfx.Addr()) || pfx != pfx.Masked() {
		return 0, false
	}
	return int((addrToU32(pfx.Addr()) - addrToU32(p.base.Addr())) >> (32 - p.size)), true
}

// take reserves a free subnet.
func (p *subnetPool) take() (netip.Prefix, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k := range p.n {
		i := (p.cursor + k) % p.n
		if !p.used[i] {
			p.used[i] = true
			p.cursor = (i + 1) % p.n
			return p.block(i), nil
		}
	}
	return netip.Prefix{}, fmt.Errorf("the address pool %s is used up: all %d /%d networks are live; remove sandboxes (agentenv sandboxes reap) or give a larger subnet_base", p.base, p.n, p.size)
}

// release frees a subnet the pool handed out; others are ignored.
func (p *subnetPool) release(pfx netip.Prefix) {
	i, ok := p.index(pfx)
	if !ok {
		return
	}
	p.mu.Lock()
	delete(p.used, i)
	p.mu.Unlock()
}

// markUsed records that pfx is taken (by any network): every block it
// overlaps is skipped.
func (p *subnetPool) markUsed(pfx netip.Prefix) {
	if !pfx.Addr().Is4() || !pfx.Overlaps(p.base) {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if pfx.Bits() >= p.size {
		i, _ := p.index(netip.PrefixFrom(pfx.Addr(), p.size).Masked())
		p.used[i] = true
		return
	}
	// pfx is larger than a block: every block inside both.
	lo, hi := pfx.Masked(), p.base
	if hi.Bits() > lo.Bits() {
		lo, hi = hi, lo
	}
	first, _ := p.index(netip.PrefixFrom(lo.Addr(), p.size))
	count := 1 << (p.size - lo.Bits())
	for i := first; i < first+count && i < p.n; i++ {
		p.used[i] = true
	}
}

// forgetAll drops every mark, before the pool is loaded again from the
// engine's networks (marks of subnets other processes since freed go).
func (p *subnetPool) forgetAll() {
	p.mu.Lock()
	p.used = map[int]bool{}
	p.mu.Unlock()
}

// inUse is how many subnets are taken.
func (p *subnetPool) inUse() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.used)
}

func addrToU32(a netip.Addr) uint32 {
	b := a.As4()
	return binary.BigEndian.Uint32(b[:])
}

func u32ToAddr(u uint32) netip.Addr {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], u)
	return netip.AddrFrom4(b)
}
