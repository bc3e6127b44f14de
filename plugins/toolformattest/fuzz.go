package toolformattest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"reflect"
	"testing"

	"github.com/agentenv/agentenv/sdk/toolformat"
)

// IsObject reports whether raw is exactly one JSON object (numbers of any
// size allowed).
func IsObject(raw []byte) bool {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var obj map[string]any
	if d.Decode(&obj) != nil || obj == nil {
		return false
	}
	_, err := d.Token()
	return err == io.EOF
}

// Invariants is a format's check that holds for every reply and its parse.
type Invariants func(t *testing.T, reply string, p toolformat.Parsed)

// Hostile parses each of replies (seeds built to find slow paths) with
// tools offered and checks the invariants.
func Hostile(t *testing.T, newParser func() toolformat.Parser, replies []string, tools []toolformat.Tool, check Invariants) {
	for _, reply := range replies {
		p, err := newParser().Parse(context.Background(), reply, tools)
		if err != nil {
			t.Fatal(err)
		}
		check(t, reply, p)
	}
}

// Fuzz seeds f with format's golden replies and the first 4 KiB of each
// hostile reply, then checks: no panic, no hang, invariants hold, same
// answer twice.
func Fuzz(f *testing.F, format string, newParser func() toolformat.Parser, hostile []string, tools []toolformat.Tool, check Invariants) {
	cases, _ := Cases(f, format)
	for _, c := range cases {
		f.Add(c.Reply)
	}
	for _, r := range hostile {
		f.Add(r[:min(len(r), 4096)])
	}
	f.Fuzz(func(t *testing.T, reply string) {
		p, err := newParser().Parse(context.Background(), reply, tools)
		if err != nil {
			t.Fatal(err)
		}
		check(t, reply, p)
		again, _ := newParser().Parse(context.Background(), reply, tools)
		if !reflect.DeepEqual(p, again) {
			t.Fatalf("two parses of %q differ", reply)
		}
	})
}
