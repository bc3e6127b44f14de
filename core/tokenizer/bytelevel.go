package tokenizer

// GPT-2's byte-level alphabet: every byte is shown as one printable rune, so
// a vocabulary of strings can hold any byte sequence. Printable Latin-1
// bytes stand for themselves; the rest are moved to U+0100 and up, in order.
// The tokenizer works on raw bytes and uses these tables only to read the
// vocabulary (and to write it back in Decode).
var (
	byteToRune [256]rune
	runeToByte = make(map[rune]byte, 256)
)

func init() {
	n := rune(0)
	for b := 0; b < 256; b++ {
		printable := (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)
		r := rune(b)
		if !printable {
			r = 256 + n
			n++
		}
		byteToRune[b] = r
		runeToByte[r] = byte(b)
	}
}

// fromByteLevel turns a vocabulary string back into the bytes it stands for;
// ok is false when the string holds a rune outside the alphabet (such a token
// can never be produced from text).
func fromByteLevel(tok string) (raw string, ok bool) {
	buf := make([]byte, 0, len(tok))
	for _, r := range tok {
		b, found := runeToByte[r]
		if !found {
			return "", false
		}
		buf = append(buf, b)
	}
	return string(buf), true
}
