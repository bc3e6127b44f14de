package hostenv

import (
	"strings"
	"testing"
)

func TestCappedBuffer(t *testing.T) {
	for _, tc := range []struct {
		name      string
		max       int
		writes    []string
		want      string
		truncated bool
	}{
		{"under the cap", 10, []string{"abc", "def"}, "abcdef", false},
		{"exactly the cap", 6, []string{"abc", "def"}, "abcdef", false},
		{"cut inside a write", 4, []string{"abc", "def"}, "abcd\n[output truncated]", true},
		{"writes after full", 3, []string{"abc", "def", "g"}, "abc\n[output truncated]", true},
		{"zero cap", 0, []string{"a"}, "\n[output truncated]", true},
		{"nothing written", 5, nil, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := NewCappedBuffer(tc.max)
			for _, w := range tc.writes {
				n, err := b.Write([]byte(w))
				if n != len(w) || err != nil {
					t.Fatalf("Write(%q) = %d, %v; want %d, nil", w, n, err, len(w))
				}
			}
			if got := b.String(); got != tc.want {
				t.Fatalf("String() = %q, want %q", got, tc.want)
			}
			if b.Truncated() != tc.truncated {
				t.Fatalf("Truncated() = %v, want %v", b.Truncated(), tc.truncated)
			}
			if b.Len() > tc.max {
				t.Fatalf("kept %d bytes over the cap %d", b.Len(), tc.max)
			}
		})
	}
}

func TestOutputTail(t *testing.T) {
	long := strings.Repeat("x", 2500) + "END"
	for _, tc := range []struct {
		name, out, want string
	}{
		{"empty", "", ""},
		{"blank", " \n\t", ""},
		{"short, trimmed", "\nboom\n", "; its output ends:\nboom"},
		{"long keeps the end", long, "; its output ends:\n..." + long[len(long)-2000:]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := OutputTail(tc.out); got != tc.want {
				t.Fatalf("OutputTail = %q, want %q", got, tc.want)
			}
		})
	}
}
