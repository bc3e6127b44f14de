// Package spelling finds what a user probably meant by a name that does
// not exist (a flag, a folder): the options a few edits away.
package spelling

import "strings"

// Close reports whether option is a likely misspelling of name: a few
// edits away (about one per three letters), ignoring case.
func Close(name, option string) bool {
	return Distance(strings.ToLower(name), strings.ToLower(option)) <= max(1, len(name)/3)
}

// Nearest is the option closest to name when it is Close ("" if none).
func Nearest(name string, options []string) string {
	best, bestD := "", -1
	for _, o := range options {
		if !Close(name, o) {
			continue
		}
		if d := Distance(strings.ToLower(name), strings.ToLower(o)); bestD < 0 || d < bestD {
			best, bestD = o, d
		}
	}
	return best
}

// Distance is the Levenshtein distance between a and b, in bytes.
func Distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
