package toolformattest

import (
	"math/rand/v2"
	"strings"
)

// RandString joins up to 11 pieces drawn from pool: each format leaves
// out of its pool the tags that would end a value or a call.
func RandString(r *rand.Rand, pool []string) string {
	var b strings.Builder
	for range r.IntN(12) {
		b.WriteString(pool[r.IntN(len(pool))])
	}
	return b.String()
}

// RandName returns a random identifier-like tool or parameter name.
func RandName(r *rand.Rand) string {
	const first, rest = "abcdefghijklmnopqrstuvwxyz_", "abcdefghijklmnopqrstuvwxyz_0123456789"
	n := []byte{first[r.IntN(len(first))]}
	for range r.IntN(10) {
		n = append(n, rest[r.IntN(len(rest))])
	}
	return string(n)
}
