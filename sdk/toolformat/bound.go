package toolformat

import (
	"unicode/utf8"

	"google.golang.org/protobuf/proto"

	"github.com/agentenv/agentenv/sdk"
	"github.com/agentenv/agentenv/sdk/internal/pb"
)

// unparsedFieldBytes cuts an Unparsed entry's Text and Reason.
const unparsedFieldBytes = 1024

// callsBudget is how large the calls of one answer may be together: half
// the message limit, leaving the rest for the content and the unparsed.
const callsBudget = sdk.MaxMessageBytes / 2

// boundedResponse turns p into the answer sent to the host, bounded so
// that no reply under the host's frame limit can make it overflow the
// message limit (a flood of bad blocks, each with its reason, outgrows the
// reply several times): at most MaxUnparsedSent unparsed entries, each cut
// to about 1 KiB, and calls up to callsBudget; the rest are counted.
func boundedResponse(p Parsed) *pb.ParseResponse {

	out := &pb.ParseResponse{Content: ValidUTF8(p.Content)}
	size := 0
	for i, c := range p.Calls {
		call := &pb.Call{Name: ValidUTF8(c.Name), Arguments: c.Arguments}
		if size += proto.Size(call) + 8; size > callsBudget {
			out.CallsOmitted = uint32(len(p.Calls) - i)
			break
		}
		out.Calls = append(out.Calls, call)
	}
	for i, u := range p.Unparsed {
		if i == MaxUnparsedSent {
			out.UnparsedOmitted = uint32(len(p.Unparsed) - i)
			break
		}
		out.Unparsed = append(out.Unparsed, &pb.Unparsed{
			Text: cut(ValidUTF8(u.Text), unparsedFieldBytes), Reason: cut(ValidUTF8(u.Reason), unparsedFieldBytes)})
	}
	return out
}

// cut shortens s to at most n bytes on a rune boundary, marking the cut.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
