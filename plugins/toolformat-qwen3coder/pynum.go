package qwen3coder

import (
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The qwen3_coder parser types values with Python's int(), float() and
// ast.literal_eval; this file and pyliteral.go reproduce what those accept
// so a value reads here exactly as it reads in vLLM.

// pyIsSpace is Python's str.isspace for one rune: Go's unicode.IsSpace
// plus the information separators U+001C..U+001F.
func pyIsSpace(r rune) bool { return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f) }

// pyStrip is Python's str.strip() with no argument.
func pyStrip(s string) string { return strings.TrimFunc(s, pyIsSpace) }

// pyDecimal returns the value of a Unicode decimal digit (category Nd), or
// -1. Nd digits come in aligned runs of ten, 0 through 9.
func pyDecimal(r rune) int {
	if r >= '0' && r <= '9' {
		return int(r - '0')
	}
	if r < 0x80 || !unicode.Is(unicode.Nd, r) {
		return -1
	}
	start := r
	for start > 0 && unicode.Is(unicode.Nd, start-1) {
		start--
	}
	return int(r-start) % 10
}

// pyNumberText does what int() and float() do to a str before reading
// it: strips whitespace, maps Unicode decimal digits to ASCII, and removes
// underscores that sit between two digits. ok is false for any other
// underscore or non-ASCII character. Unlike str.strip(), number parsing
// does not treat U+001C..U+001F as whitespace; unicode.IsSpace agrees.
func pyNumberText(s string) (string, bool) {
	s = strings.TrimFunc(s, unicode.IsSpace)
	var b strings.Builder
	b.Grow(len(s))
	prevDigit := false
	for i, r := range s {
		if d := pyDecimal(r); d >= 0 {
			b.WriteByte(byte('0' + d))
			prevDigit = true
			continue
		}
		if r == '_' {
			next, _ := utf8.DecodeRuneInString(s[i+1:]) // '_' is one byte
			if !prevDigit || i+1 >= len(s) || pyDecimal(next) < 0 {
				return "", false
			}
			prevDigit = false
			continue
		}
		if r >= 0x80 {
			return "", false
		}
		b.WriteRune(r)
		prevDigit = false
	}
	return b.String(), true
}

// pyInt is Python's int(s): an optional sign and decimal digits (leading
// zeros allowed), surrounding whitespace and single underscores between
// digits allowed. It returns the value in decimal.
func pyInt(s string) (string, bool) {
	t, ok := pyNumberText(s)
	if !ok || t == "" {
		return "", false
	}
	digits := t
	if digits[0] == '+' || digits[0] == '-' {
		digits = digits[1:]
	}
	if digits == "" || strings.IndexFunc(digits, func(r rune) bool { return r < '0' || r > '9' }) >= 0 {
		return "", false
	}
	if len(digits) > maxIntDigits { // int() counts leading zeros too
		return "", false
	}
	if len(digits) <= 18 { // fits an int64: skip big.Int
		n, err := strconv.ParseInt(t, 10, 64)
		return strconv.FormatInt(n, 10), err == nil
	}
	n, ok := new(big.Int).SetString(t, 10)
	if !ok {
		return "", false
	}
	return n.String(), true
}

// maxIntDigits is CPython's default limit on decimal digits when it
// converts between int and str (sys.get_int_max_str_digits()); int(),
// integer literals and json.dumps all fail beyond it.
const maxIntDigits = 4300

// tooManyDigits reports whether a value's decimal digits (no sign) exceed
// the limit; leading zeros do not count (a literal has none unless it is
// zero, and a value's str() has none).
func tooManyDigits(digits string) bool {
	return len(strings.TrimLeft(digits, "0")) > maxIntDigits
}

// pyFloat is Python's float(s): decimal notation with an optional
// exponent, or inf/infinity/nan in any case, with a sign, whitespace and
// digit-separating underscores. Values too large become ±Inf, as in Python.
func pyFloat(s string) (float64, bool) {
	t, ok := pyNumberText(s)
	if !ok || t == "" {
		return 0, false
	}
	body := t
	if body[0] == '+' || body[0] == '-' {
		body = body[1:]
	}
	switch strings.ToLower(body) {
	case "inf", "infinity":
		if t[0] == '-' {
			return math.Inf(-1), true
		}
		return math.Inf(1), true
	case "nan":
		return math.NaN(), true
	}
	if !isDecimalFloat(body) {
		return 0, false
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil && !isRangeErr(err) {
		return 0, false
	}
	return f, true // on overflow ParseFloat gives ±Inf, like Python
}

func isRangeErr(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

// isDecimalFloat reports whether s is digits[.digits][e[+-]digits] with at
// least one mantissa digit (no sign, no hex, no underscores).
func isDecimalFloat(s string) bool {
	i, n := 0, len(s)
	digits := func() int {
		start := i
		for i < n && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		return i - start
	}
	m := digits()
	if i < n && s[i] == '.' {
		i++
		m += digits()
	}
	if m == 0 {
		return false
	}
	if i < n && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < n && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	return i == n
}

// floatArgument is what vLLM's number conversion makes of a float: an
// integral value becomes a Python int (exact, however large), anything
// else stays a float. ok is false for NaN and ±Inf, which vLLM cannot
// convert (int(inf) raises; NaN falls back to the raw text).
func floatArgument(f float64) (string, bool) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "", false
	}
	if f == math.Trunc(f) {
		n, _ := new(big.Float).SetFloat64(f).Int(nil)
		return n.String(), true
	}
	return pyFloatRepr(f), true
}

// pyFloatRepr is Python's repr() of a finite float: the shortest digits
// that round-trip, in fixed notation for exponents -4..15 (always with a
// fractional part) and scientific notation with a two-digit exponent
// otherwise. Both forms are valid JSON numbers.
func pyFloatRepr(f float64) string {
	e := strconv.FormatFloat(f, 'e', -1, 64) // [-]d[.ddd]e±XX
	neg := strings.HasPrefix(e, "-")
	e = strings.TrimPrefix(e, "-")
	mant, expText, _ := strings.Cut(e, "e")
	exp, _ := strconv.Atoi(expText)
	digits := strings.Replace(mant, ".", "", 1)
	var out string
	switch {
	case exp < -4 || exp >= 16:
		m := digits[:1]
		if len(digits) > 1 {
			m += "." + digits[1:]
		}
		sign := "+"
		if exp < 0 {
			sign, exp = "-", -exp
		}
		out = m + "e" + sign + leftPad2(strconv.Itoa(exp))
	case exp < 0:
		out = "0." + strings.Repeat("0", -exp-1) + digits
	default:
		intLen := exp + 1
		if len(digits) <= intLen {
			out = digits + strings.Repeat("0", intLen-len(digits)) + ".0"
		} else {
			out = digits[:intLen] + "." + digits[intLen:]
		}
	}
	if neg {
		out = "-" + out
	}
	return out
}

func leftPad2(s string) string {
	if len(s) < 2 {
		return "0" + s
	}
	return s
}
