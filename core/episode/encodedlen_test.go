package episode

import (
	"encoding/json"
	"testing"
)

// encodedLen counts as encoding/json writes, and clipEncoded cuts on a
// character boundary within the limit.
func TestEncodedLen(t *testing.T) {
	for _, s := range []string{"", "plain", "<a href=\"x\">&</a>", "tab\tnl\ncr\r\b\f\x01\x1f", "é€😀", "bad\xff\xfe", "\u2028\u2029", "\\"} {
		b, _ := json.Marshal(s)
		if got, want := encodedLen(s), int64(len(b)-2); got != want {
			t.Errorf("encodedLen(%q) = %d, json writes %d", s, got, want)
		}
		for limit := int64(0); limit <= int64(len(b)); limit++ {
			kept, cut := clipEncoded(s, limit)
			if encodedLen(kept) > limit || int64(len(kept))+cut != int64(len(s)) || s[:len(kept)] != kept {
				t.Errorf("clipEncoded(%q, %d) = %q, %d", s, limit, kept, cut)
			}
		}
	}
}
