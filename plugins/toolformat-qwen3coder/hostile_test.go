package qwen3coder

import (
	"context"
	"encoding/json"
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/agentenv/agentenv/sdk/toolformat"
)

// hostileTools type "items" as an array, so its value is read as JSON and
// then as a Python literal.
var hostileTools = []toolformat.Tool{{Name: "submit", Parameters: json.RawMessage(`{"type": "object", "properties": {"items": {"type": "array"}}}`)}}

func hostileCall(value string) string {
	return "<tool_call>\n<function=submit>\n<parameter=items>\n" + value + "\n</parameter>\n</function>\n</tool_call>"
}

// allocated is the bytes fn allocates on the heap.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// A reply's Python literal costs memory in proportion to the reply, as
// its JSON does: a 4 MiB list of zeros with a trailing comma (not JSON,
// so read as a literal) held a value per element (about 550 MiB; 1.29 GiB
// of the server's peak for 9.5 MiB).
func TestPythonLiteralMemoryIsBounded(t *testing.T) {
	for _, tc := range []struct {
		name, value string
		want        string // the reason, or "" for a call
	}{
		{"list of zeros", "[" + strings.Repeat("0,", 2<<20) + "]", ""},
		{"nested lists", "[" + strings.Repeat("[0,None,True],", 300_000) + "]", ""},
		{"dict", "{" + strings.Repeat("'k': 1, ", 20) + strings.Repeat("1: 2, ", 400_000) + "}", ""},
		{"set", "[" + strings.Repeat("{0},", 1<<20) + "]", "holds a Python set"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reply := hostileCall(tc.value)
			var got toolformat.Parsed
			n := allocated(func() { got, _ = New().Parse(context.Background(), reply, hostileTools) })
			t.Logf("%d bytes of reply: %d MiB allocated", len(reply), n>>20)
			if limit := uint64(len(reply)) * 8; n > limit {
				t.Errorf("parsing a %d-byte literal allocated %d MiB, want at most 8 times the reply (%d MiB)", len(reply), n>>20, limit>>20)
			}
			switch {
			case tc.want == "" && (len(got.Calls) != 1 || len(got.Unparsed) != 0):
				t.Fatalf("got %d calls, unparsed %.200v", len(got.Calls), got.Unparsed)
			case tc.want != "" && (len(got.Unparsed) != 1 || !strings.Contains(got.Unparsed[0].Reason, tc.want)):
				t.Fatalf("got %d calls, unparsed %.200v; want the reason %q", len(got.Calls), got.Unparsed, tc.want)
			}
			if tc.want == "" && !json.Valid(got.Calls[0].Arguments) {
				t.Fatalf("arguments are not JSON: %.200s", got.Calls[0].Arguments)
			}
		})
	}
}

// A radix literal is refused by its length before it is converted: a
// 6 MiB hex literal took 8 s of a core (quadratic base conversion) to
// learn that its decimal form has more digits than Python writes.
func TestRadixLiteralIsBoundedBeforeConversion(t *testing.T) {
	for _, tc := range []struct {
		name, value, want string
	}{
		{"hex", "[0x" + strings.Repeat("f", 1<<20) + "]", "an integer of more than 4300 digits"},
		{"binary", "[0b" + strings.Repeat("1", 1<<20) + "]", "an integer of more than 4300 digits"},
		{"octal, underscores", "[0o" + strings.Repeat("7_", 1<<19) + "7]", "an integer of more than 4300 digits"},
		{"hex of 4300 digits", "[0x" + strings.Repeat("f", 3571) + "]", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reply := hostileCall(tc.value)
			var got toolformat.Parsed
			n := allocated(func() { got, _ = New().Parse(context.Background(), reply, hostileTools) })
			if limit := uint64(len(reply))*4 + 1<<20; n > limit {
				t.Errorf("parsing a %d-byte radix literal allocated %d KiB, want at most %d KiB", len(reply), n>>10, limit>>10)
			}
			if tc.want == "" {
				if len(got.Calls) != 1 {
					t.Fatalf("got unparsed %.300v", got.Unparsed)
				}
				return
			}
			if len(got.Unparsed) != 1 || !strings.Contains(got.Unparsed[0].Reason, tc.want) {
				t.Fatalf("got %d calls, unparsed %.300v; want the reason %q", len(got.Calls), got.Unparsed, tc.want)
			}
		})
	}
}

// A parse stops when its step ends: with its context cancelled, a long
// literal and a flood of calls are both given up, with the context's error.
func TestParseStopsWhenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for name, reply := range map[string]string{
		"long literal": hostileCall("[" + strings.Repeat("0,", 1<<20) + "]"),
		"many calls":   strings.Repeat(hostileCall("[1]"), 10_000),
	} {
		if _, err := New().Parse(ctx, reply, hostileTools); !errors.Is(err, context.Canceled) {
			t.Errorf("%s: a cancelled parse returned %v, want context.Canceled", name, err)
		}
	}
}
