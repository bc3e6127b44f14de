package envclient

import (
	"bytes"
	"context"
	"io"
	"mime"
	"net/http"
	"sync"
	"sync/atomic"
)

// What an env's answer to a tool call may cost the server: the answer is
// read through a cutter that keeps at most the call's limit of string
// content and drops the rest as it streams by, so a tool returning 100 MiB
// costs a few MiB, never the 100 MiB and its copies the MCP SDK would make
// of it (read whole, decoded, joined).
const (
	// shortString is what every string keeps whatever the budget: keys,
	// types and MIME types stay whole, so the answer still decodes.
	shortString = 256
	// structureSlack is the JSON outside strings (and short strings) an
	// answer may hold beyond its limit before further array items and
	// object members are dropped: a flood of tiny content parts is cut too.
	structureSlack = 1 << 20
	chunkSize      = 32 << 10
)

// cutKey carries a call's limit to the transport, through the request's
// context (the SDK sends the call with the caller's context).
type cutKey struct{}

// callCut is one call's limit and what its answer lost.
type callCut struct {
	limit int64
	cut   atomic.Int64 // bytes of the answer dropped
}

func withCut(ctx context.Context, c *callCut) context.Context {
	return context.WithValue(ctx, cutKey{}, c)
}

// cutTransport wraps the bodies of tool-call answers in a cutter.
type cutTransport struct {
	base http.RoundTripper
}

func (t cutTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	c, _ := req.Context().Value(cutKey{}).(*callCut)
	if err != nil || c == nil || resp.Body == nil {
		return resp, err
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch mt {
	case "application/json":
		resp.Body = &cutReader{src: resp.Body, j: newJSONCut(c)}
	case "text/event-stream":
		resp.Body = &cutReader{src: resp.Body, j: newJSONCut(c), sse: true, lineStart: true}
	default:
		return resp, nil
	}
	resp.ContentLength = -1
	resp.Header.Del("Content-Length")
	return resp, nil
}

// cutReader streams src through the cutter. In SSE mode only the data
// lines are JSON; other lines pass as they are, and a blank line (the end
// of an event) starts the next message afresh.
type cutReader struct {
	src io.ReadCloser
	j   *jsonCut
	sse bool
	// SSE line state: the start of the line until its kind is known.
	lineStart bool
	head      []byte
	inData    bool
	buf       []byte
	out       bytes.Buffer
	err       error
}

// chunks are cutReader's read buffers, one per call in flight.
var chunks = sync.Pool{New: func() any { b := make([]byte, chunkSize); return &b }}

func (r *cutReader) Close() error { return r.src.Close() }

// release gives the read buffer back once the answer is read to its end
// (only Read does: a Close may come from another goroutine mid-Read).
func (r *cutReader) release() {
	if b := r.buf; b != nil {
		r.buf = nil
		chunks.Put(&b)
	}
}

func (r *cutReader) Read(p []byte) (int, error) {
	for r.out.Len() == 0 && r.err == nil {
		if r.buf == nil {
			r.buf = *chunks.Get().(*[]byte)
		}
		n, err := r.src.Read(r.buf)
		chunk := r.buf[:n]
		for i := 0; i < len(chunk); i++ {
			if r.j.dropping() && !r.lineStart {
				// The bulk of a huge result: skip to what can end the
				// string (or the SSE line) without a look at each byte.
				k := bytes.IndexAny(chunk[i:], "\"\\\n")
				if k < 0 {
					r.j.c.cut.Add(int64(len(chunk) - i))
					break
				}
				r.j.c.cut.Add(int64(k))
				i += k
			}
			r.feed(chunk[i])
		}
		if r.err = err; err != nil {
			r.release()
		}
	}
	if r.out.Len() > 0 {
		return r.out.Read(p)
	}
	return 0, r.err
}

func (r *cutReader) feed(b byte) {
	if !r.sse {
		r.j.feed(b, &r.out)
		return
	}
	if r.lineStart {
		// Hold the line's start until it shows whether it is "data:".
		r.head = append(r.head, b)
		data := []byte("data:")
		switch {
		case b == '\n':
			if len(r.head) <= 2 { // "\n" or "\r\n": the event ends
				r.j.reset()
			}
			r.out.Write(r.head)
			r.head = r.head[:0]
			return
		case len(r.head) <= len(data) && bytes.HasPrefix(data, r.head):
			if len(r.head) == len(data) {
				r.out.Write(r.head)
				r.head = r.head[:0]
				r.lineStart, r.inData = false, true
			}
			return
		default:
			r.out.Write(r.head)
			r.head = r.head[:0]
			r.lineStart, r.inData = false, false
			return
		}
	}
	if b == '\n' {
		r.out.WriteByte(b)
		r.lineStart = true
		return
	}
	if r.inData {
		r.j.feed(b, &r.out)
		return
	}
	r.out.WriteByte(b)
}

// jsonCut is a streaming JSON filter: it copies JSON text, cutting each
// long string to what the budget allows (on a character boundary; base64
// fields, "data" and "blob", to whole quads so they still decode), and
// past the structure slack it drops the remaining items of arrays and
// members of objects. What it drops is counted in the call's cut. Its
// output is valid JSON whenever its input is.
type jsonCut struct {
	c         *callCut
	remaining int64 // string bytes the answer may still keep
	emitted   int64 // bytes written, strings included

	stack     []byte // open containers: '{' or '['
	expectKey bool   // in an object, before a member's key
	key       []byte // the last key read (its first bytes), for base64 fields
	inKey     bool

	inString  bool
	escLetter bool // after a backslash
	hexLeft   int  // hex digits of a \u escape still to come
	kept      int64
	allow     int64
	keeping   bool
	base64    bool
	quad      []byte

	skipDepth int // >0: dropping until the container at this depth closes
}

func newJSONCut(c *callCut) *jsonCut {
	return &jsonCut{c: c, remaining: c.limit}
}

// reset readies the cutter for the next message of a stream.
func (j *jsonCut) reset() {
	j.stack, j.expectKey, j.inString, j.escLetter, j.hexLeft, j.skipDepth, j.inKey = j.stack[:0], false, false, false, 0, 0, false
}

// dropping says whether the cutter is inside a string past its
// allowance, where every byte but a quote or a backslash is dropped.
func (j *jsonCut) dropping() bool {
	return j.inString && !j.keeping && !j.escLetter && j.hexLeft == 0
}

func (j *jsonCut) emit(out *bytes.Buffer, b byte) {
	if j.skipDepth > 0 {
		j.c.cut.Add(1)
		return
	}
	out.WriteByte(b)
	j.emitted++
}

func isBase64Key(k []byte) bool { return string(k) == "data" || string(k) == "blob" }

func (j *jsonCut) feed(b byte, out *bytes.Buffer) {
	if j.inString {
		j.stringByte(b, out)
		return
	}
	switch b {
	case '"':
		j.inString, j.escLetter, j.hexLeft, j.kept = true, false, 0, 0
		j.inKey = len(j.stack) > 0 && j.stack[len(j.stack)-1] == '{' && j.expectKey
		if j.inKey {
			j.key = j.key[:0]
		}
		j.base64 = !j.inKey && isBase64Key(j.key)
		j.allow = max(j.remaining, shortString)
		j.keeping = true
		j.quad = j.quad[:0]
		j.emit(out, b)
	case '{', '[':
		j.emit(out, b)
		j.stack = append(j.stack, b)
		j.expectKey = b == '{'
		j.key = j.key[:0]
	case '}', ']':
		if j.skipDepth > 0 && len(j.stack) == j.skipDepth {
			j.skipDepth = 0 // the container's remaining items are gone; close it
		}
		j.emit(out, b)
		if len(j.stack) > 0 {
			j.stack = j.stack[:len(j.stack)-1]
		}
		j.expectKey = false
	case ',':
		if j.skipDepth == 0 && j.emitted > j.c.limit+structureSlack && len(j.stack) > 0 {
			j.skipDepth = len(j.stack)
		}
		j.emit(out, b)
		j.expectKey = len(j.stack) > 0 && j.stack[len(j.stack)-1] == '{'
		j.key = j.key[:0]
	case ':':
		j.emit(out, b)
		j.expectKey = false
	default:
		j.emit(out, b)
	}
}

func (j *jsonCut) stringByte(b byte, out *bytes.Buffer) {
	if !j.escLetter && j.hexLeft == 0 && b == '"' {
		if j.base64 && j.keeping {
			for _, q := range j.quad {
				j.emit(out, q)
			}
		} else if j.base64 {
			j.c.cut.Add(int64(len(j.quad)))
		}
		j.quad = j.quad[:0]
		j.inString = false
		if j.skipDepth == 0 {
			j.remaining = max(j.remaining-j.kept, 0)
		}
		j.emit(out, b)
		return
	}
	// A byte continuing what was kept (an escape, a UTF-8 sequence) is
	// kept with it; the first byte past the allowance that starts
	// something new ends the keeping.
	continuing := j.escLetter || j.hexLeft > 0 || (b >= 0x80 && b < 0xC0)
	switch {
	case j.escLetter:
		j.escLetter = false
		if b == 'u' {
			j.hexLeft = 4
		}
	case j.hexLeft > 0:
		j.hexLeft--
	case b == '\\':
		j.escLetter = true
	}
	if j.inKey && len(j.key) < 8 {
		j.key = append(j.key, b)
	}
	if j.keeping && j.kept >= j.allow && !continuing {
		j.keeping = false
	}
	if !j.keeping {
		j.c.cut.Add(1)
		return
	}
	j.kept++
	if !j.base64 {
		j.emit(out, b)
		return
	}
	j.quad = append(j.quad, b)
	if len(j.quad) == 4 {
		for _, q := range j.quad {
			j.emit(out, q)
		}
		j.quad = j.quad[:0]
	}
}
