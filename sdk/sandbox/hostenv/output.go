package hostenv

import "bytes"

// CappedBuffer keeps the first Max bytes written to it and drops the rest,
// so a command's output cannot grow a plugin without bound; String marks
// a cut. Writes never fail, so the command is never stopped by a full pipe.
type CappedBuffer struct {
	bytes.Buffer
	Max       int
	truncated bool
}

// NewCappedBuffer is an empty buffer keeping max bytes.
func NewCappedBuffer(max int) *CappedBuffer { return &CappedBuffer{Max: max} }

func (b *CappedBuffer) Write(p []byte) (int, error) {
	if room := b.Max - b.Len(); room < len(p) {
		b.truncated = true
		if room > 0 {
			b.Buffer.Write(p[:room])
		}
		return len(p), nil
	}
	return b.Buffer.Write(p)
}

// Truncated reports whether bytes were dropped.
func (b *CappedBuffer) Truncated() bool { return b.truncated }

// String is what was kept, followed by "\n[output truncated]" if bytes
// were dropped.
func (b *CappedBuffer) String() string {
	if b.truncated {
		return b.Buffer.String() + "\n[output truncated]"
	}
	return b.Buffer.String()
}
