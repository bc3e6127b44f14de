package jsonscan

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

func TestNumbers(t *testing.T) {
	tests := []struct {
		src  string
		want []string // tokens; a leading ! marks a non-finite one
	}{
		{`{"a": 1, "b": [-2.5e3, NaN], "c": "NaN 7", "d": -Infinity}`, []string{"1", "-2.5e3", "!NaN", "!-Infinity"}},
		{`[Infinity,0]`, []string{"!Infinity", "0"}},
		{`"esc\"aped 1" 2`, []string{"2"}},
		{`{"x": Nab, "y": Inf}`, nil},
		{`--Infinity 1e-`, []string{"--", "!Infinity", "1e-"}},
	}
	for _, tc := range tests {
		var got []string
		Numbers([]byte(tc.src), func(n Number) {
			s := tc.src[n.Start:n.End]
			if n.NonFinite {
				s = "!" + s
			}
			got = append(got, s)
		})
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Numbers(%s) = %q, want %q", tc.src, got, tc.want)
		}
	}
}

func TestMaskNonFinite(t *testing.T) {
	tests := []struct {
		src   string
		valid bool // json.Valid of the masked text: what Python's json.loads accepts
	}{
		{`{"a": NaN, "b": [Infinity, -Infinity]}`, true},
		{`{"a": "NaN"}`, true},
		{`NaN`, true},
		{`-NaN`, false},
		{`+Infinity`, false},
		{`NaN1`, false},
		{`[NaNNaN]`, false},
		{`{NaN: 1}`, false},
		{`[1e-Infinity]`, false},
	}
	for _, tc := range tests {
		masked := MaskNonFinite([]byte(tc.src))
		if len(masked) != len(tc.src) || json.Valid(masked) != tc.valid {
			t.Errorf("MaskNonFinite(%s) = %s: valid %v, want %v", tc.src, masked, json.Valid(masked), tc.valid)
		}
	}
	if got := MaskNonFinite(nil); len(got) != 0 {
		t.Errorf("MaskNonFinite(nil) = %q", got)
	}
	plain := []byte(`{"a": 1}`)
	if got := MaskNonFinite(plain); &got[0] != &plain[0] {
		t.Errorf("MaskNonFinite copied text with nothing to mask")
	}
}

func TestIsInteger(t *testing.T) {
	for tok, want := range map[string]bool{"0": true, "-12": true, "1.0": false, "1e3": false, "2E-1": false} {
		if IsInteger([]byte(tok)) != want {
			t.Errorf("IsInteger(%s) != %v", tok, want)
		}
	}
}

func TestOddity(t *testing.T) {
	long := "1" + string(bytes.Repeat([]byte("0"), MaxIntDigits))
	tests := []struct {
		src  string
		want Oddity
	}{
		{"12", Plain}, {"-1.5e3", Plain}, {"1e-400", Plain}, {"1.7976931348623157e308", Plain},
		{"NaN", NonFiniteValue}, {"-Infinity", NonFiniteValue}, {"1e400", NonFiniteValue}, {"-1.8e308", NonFiniteValue},
		{long[:MaxIntDigits], Plain}, {"-" + long[:MaxIntDigits], Plain}, {long, LongInteger}, {"-" + long, LongInteger},
		{long + ".0", NonFiniteValue},
	}
	for _, tc := range tests {
		n, ok := FirstOdd([]byte("[1, "+tc.src+"]"), tc.want)
		if tc.want == Plain {
			var got Oddity
			Numbers([]byte(tc.src), func(n Number) { got = n.Oddity([]byte(tc.src)) })
			if got != Plain {
				t.Errorf("Oddity(%.20s) = %v, want plain", tc.src, got)
			}
			continue
		}
		if !ok || n.Start != 4 || n.End != 4+len(tc.src) {
			t.Errorf("FirstOdd([1, %.20s], %v) = %+v, %v", tc.src, tc.want, n, ok)
		}
	}
}

// FuzzNumbers: on any text, number tokens come in order, inside the text
// and apart; masking keeps the length and touches only non-finite tokens.
func FuzzNumbers(f *testing.F) {
	for _, s := range []string{`{"a": [NaN, -Infinity, 1e400, "NaN"]}`, `--Infinity`, `"\"1`, `-`, ``} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		src := []byte(s)
		last := 0
		Numbers(src, func(n Number) {
			if n.Start < last || n.End <= n.Start || n.End > len(src) {
				t.Fatalf("token [%d, %d) after %d in %q", n.Start, n.End, last, s)
			}
			_ = n.Oddity(src)
			last = n.End
		})
		masked := MaskNonFinite(src)
		if len(masked) != len(src) {
			t.Fatalf("masking %q changed its length", s)
		}
		if json.Valid(src) && !bytes.Equal(masked, src) {
			t.Fatalf("masking changed valid JSON %q", s)
		}
	})
}
