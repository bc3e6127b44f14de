package toolformattest

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

func TestSameJSON(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{`{"a": 1, "b": [true, null]}`, `{"b":[true,null],"a":1}`, true},
		{`1`, `1.0`, false}, // numbers compare by their text
		{`{"a": 1}`, `{"a": 2}`, false},
		{`"x"`, `"x"`, true},
		{`{`, `{`, false}, // invalid JSON is never the same
		{``, ``, false},
	} {
		if got := SameJSON([]byte(tc.a), []byte(tc.b)); got != tc.want {
			t.Errorf("SameJSON(%s, %s) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestIsObject(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		want bool
	}{
		{`{}`, true},
		{`{"n": 1e400}`, true}, // past float64, still an object
		{` {"a": [1]} `, true},
		{`{} {}`, false},
		{`[]`, false},
		{`null`, false},
		{`{"a":`, false},
		{``, false},
	} {
		if got := IsObject([]byte(tc.raw)); got != tc.want {
			t.Errorf("IsObject(%q) = %v, want %v", tc.raw, got, tc.want)
		}
	}
}

func TestRandStringAndName(t *testing.T) {
	pool := []string{"a", "<x>", "é"}
	piece := regexp.MustCompile(`^(a|<x>|é)*$`)
	name := regexp.MustCompile(`^[a-z_][a-z_0-9]{0,9}$`)
	r := rand.New(rand.NewPCG(1, 2))
	long := 0
	for range 500 {
		if s := RandString(r, pool); !piece.MatchString(s) {
			t.Fatalf("RandString = %q, not made of %q", s, pool)
		} else if strings.Count(s, "a")+strings.Count(s, "<x>")+strings.Count(s, "é") == 11 {
			long++
		}
		if n := RandName(r); !name.MatchString(n) {
			t.Fatalf("RandName = %q", n)
		}
	}
	if long == 0 {
		t.Fatalf("no string of 500 has the most pieces (11)")
	}
}
