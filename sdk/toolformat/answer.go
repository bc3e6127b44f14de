package toolformat

import (
	"errors"
	"fmt"

	"google.golang.org/grpc/encoding"
	protocodec "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
)

// The host reads a plugin's answer to Parse with the bounds this SDK's
// plugin side applies (boundedResponse), so a plugin binary built
// otherwise, or not built with this SDK at all, cannot make the host hold
// more: at most MaxUnparsedSent unparsed entries, each cut to about 1 KiB,
// and calls up to callsBudget, the rest counted. The answer is read
// straight from its wire bytes, so a million entries cost the message's
// bytes (at most sdk.MaxMessageBytes), not a million decoded values.

// answer is a plugin's ParseResponse as the host keeps it.
type answer struct {
	p              Parsed
	unknownToolSet bool
}

// answerCodec is gRPC's proto codec, except that it reads an *answer
// itself.
type answerCodec struct{ proto encoding.CodecV2 }

func newAnswerCodec() answerCodec {
	return answerCodec{proto: encoding.GetCodecV2(protocodec.Name)}
}

func (c answerCodec) Name() string { return protocodec.Name }

func (c answerCodec) Marshal(v any) (mem.BufferSlice, error) { return c.proto.Marshal(v) }

func (c answerCodec) Unmarshal(data mem.BufferSlice, v any) error {
	a, ok := v.(*answer)
	if !ok {
		return c.proto.Unmarshal(data, v)
	}
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	return a.read(buf.ReadOnlyData())
}

// Field numbers of ParseResponse, Call and Unparsed (plugin.proto).
const (
	fieldContent         = 1
	fieldCalls           = 2
	fieldUnparsed        = 3
	fieldUnparsedOmitted = 4
	fieldCallsOmitted    = 5
	fieldUnknownToolSet  = 6
)

var errBadAnswer = errors.New("the plugin's answer is not a valid ParseResponse")

// read decodes a ParseResponse from b, keeping what the bounds allow and
// counting the rest. Every string is copied out of b.
func (a *answer) read(b []byte) error {
	callsSize := 0
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("%w: %w", errBadAnswer, protowire.ParseError(n))
		}
		b = b[n:]
		var field []byte
		var value uint64
		switch typ {
		case protowire.BytesType:
			field, n = protowire.ConsumeBytes(b)
		case protowire.VarintType:
			value, n = protowire.ConsumeVarint(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return fmt.Errorf("%w: %w", errBadAnswer, protowire.ParseError(n))
		}
		b = b[n:]
		switch {
		case num == fieldContent && typ == protowire.BytesType:
			a.p.Content = ValidUTF8(string(field))
		case num == fieldCalls && typ == protowire.BytesType:
			if callsSize += len(field) + 8; callsSize > callsBudget {
				a.p.CallsOmitted++
				continue
			}
			call, err := readCall(field)
			if err != nil {
				return err
			}
			a.p.Calls = append(a.p.Calls, call)
		case num == fieldUnparsed && typ == protowire.BytesType:
			if len(a.p.Unparsed) >= MaxUnparsedSent {
				a.p.UnparsedOmitted++
				continue
			}
			u, err := readUnparsed(field)
			if err != nil {
				return err
			}
			a.p.Unparsed = append(a.p.Unparsed, u)
		case num == fieldUnparsedOmitted && typ == protowire.VarintType:
			a.p.UnparsedOmitted += int(uint32(value))
		case num == fieldCallsOmitted && typ == protowire.VarintType:
			a.p.CallsOmitted += int(uint32(value))
		case num == fieldUnknownToolSet && typ == protowire.VarintType:
			a.unknownToolSet = value != 0
		}
	}
	return nil
}

// readCall decodes a Call: name (1) and arguments (2).
func readCall(b []byte) (Call, error) {
	var c Call
	err := readFields(b, func(num protowire.Number, v []byte) {
		switch num {
		case 1:
			c.Name = ValidUTF8(string(v))
		case 2:
			c.Arguments = append([]byte(nil), v...)
		}
	})
	return c, err
}

// readUnparsed decodes an Unparsed: text (1) and reason (2), each cut
// before it is copied.
func readUnparsed(b []byte) (Unparsed, error) {
	var u Unparsed
	err := readFields(b, func(num protowire.Number, v []byte) {
		switch num {
		case 1:
			u.Text = cutBytes(v, unparsedFieldBytes)
		case 2:
			u.Reason = cutBytes(v, unparsedFieldBytes)
		}
	})
	return u, err
}

// cutBytes is cut(ValidUTF8(string(v)), n), copying no more of v than
// is kept: the first n bytes read the same either way, and a longer
// prefix is always cut (ValidUTF8 never shortens text).
func cutBytes(v []byte, n int) string {
	return cut(ValidUTF8(string(v[:min(len(v), n+4)])), n)
}

// readFields calls fn with each length-delimited field of a message.
func readFields(b []byte, fn func(protowire.Number, []byte)) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("%w: %w", errBadAnswer, protowire.ParseError(n))
		}
		b = b[n:]
		if typ != protowire.BytesType {
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return fmt.Errorf("%w: %w", errBadAnswer, protowire.ParseError(n))
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return fmt.Errorf("%w: %w", errBadAnswer, protowire.ParseError(n))
		}
		b = b[n:]
		fn(num, v)
	}
	return nil
}
