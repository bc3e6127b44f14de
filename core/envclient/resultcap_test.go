package envclient_test

import (
	"context"
	"encoding/json"
	"runtime"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// A tool's answer is read through the call's limit: a result far over it
// costs the client about the limit, not the result and its copies; the
// text kept is the result's start, still valid UTF-8 when cut inside a
// character or an escape; what was dropped is counted; and the session
// goes on. Both of the transport's answer forms are cut: an SSE stream
// and a plain JSON body.
func TestCallLimitedCutsLongResults(t *testing.T) {
	const limit = 256 << 10
	tests := []struct {
		name       string
		bytes      int
		parts      int
		char       string
		wantCut    bool
		wantLenMax int
	}{
		{"one huge part", 4 << 20, 1, "x", true, limit},
		{"many parts share the limit", 1 << 20, 8, "x", true, limit + 8*300},
		{"two-byte characters cut whole", 2 << 20, 1, "é", true, limit + 4},
		{"escaped characters cut whole", 2 << 20, 1, "<\n", true, limit + 8},
		{"under the limit untouched", 1000, 3, "y", false, 3*1000 + 2},
	}
	for _, mode := range []string{"sse", "json"} {
		t.Run(mode, func(t *testing.T) {
			env := []string{}
			if mode == "json" {
				env = append(env, "TESTENV_JSON_RESPONSE=1")
			}
			c := connect(t, startEnv(t, env...), 10*time.Second)
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					ctx := context.Background()
					args, err := json.Marshal(map[string]any{"bytes": tc.bytes, "parts": tc.parts, "char": tc.char})
					if err != nil {
						t.Fatal(err)
					}
					var before, after runtime.MemStats
					runtime.ReadMemStats(&before)
					res, err := c.CallRawLimited(ctx, "flood", args, 5*time.Minute, limit) // a guard: -race on a busy machine is slow
					runtime.ReadMemStats(&after)
					if err != nil {
						t.Fatal(err)
					}
					if res.IsError {
						t.Fatalf("tool error: %.200s", res.Text)
					}
					if len(res.Text) > tc.wantLenMax || len(res.Text) == 0 {
						t.Errorf("kept %d bytes, want 1..%d", len(res.Text), tc.wantLenMax)
					}
					if !utf8.ValidString(res.Text) || strings.ContainsRune(res.Text, utf8.RuneError) {
						t.Errorf("the kept text is not clean UTF-8: ...%q", res.Text[max(len(res.Text)-16, 0):])
					}
					if !strings.HasPrefix(res.Text, strings.Repeat(tc.char, 10)) {
						t.Errorf("the kept text does not start with the result: %.40q", res.Text)
					}
					if (res.Cut > 0) != tc.wantCut {
						t.Errorf("Cut = %d, want cut %v", res.Cut, tc.wantCut)
					}
					total := tc.bytes / len(tc.char) * len(tc.char) * tc.parts
					if tc.wantCut && res.Cut < int64(total-limit-tc.parts*300)/2 {
						t.Errorf("Cut = %d of a %d-byte result", res.Cut, total)
					}
					// The SDK copies what it reads a dozen times over (read
					// whole, decoded twice, joined): with the cut that is a
					// dozen times the limit; before it, a dozen times the
					// 4 MiB result.
					if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 12<<20 {
						t.Errorf("the call allocated %d MiB for a %d KiB limit", alloc>>20, limit>>10)
					}
					// The session is alive: the next call answers.
					if r, err := c.CallTool(ctx, "echo", []byte(`{"text":"still here"}`), 10*time.Second); err != nil || r.Text != "still here" {
						t.Fatalf("next call = %+v, %v", r, err)
					}
				})
			}
		})
	}
}
