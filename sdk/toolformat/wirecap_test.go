package toolformat_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentenv/agentenv/sdk"
	"github.com/agentenv/agentenv/sdk/sdktest"
	"github.com/agentenv/agentenv/sdk/toolformat"
)

// floodFormat answers every reply with a fixed, huge Parsed.
type floodFormat struct{ p toolformat.Parsed }

func (f floodFormat) Info() sdk.Info {
	return sdk.Info{Name: "flood", Kind: sdk.KindToolFormat, Version: "1", Protocols: []int{sdk.ProtocolVersion}}
}

func (f floodFormat) Parse(context.Context, string, []toolformat.Tool) (toolformat.Parsed, error) {
	return f.p, nil
}

// A plugin's answer is bounded by the SDK before it crosses the wire: a
// reply of many bad blocks or of calls too large together for one message
// reaches the host as a bounded answer with the rest counted, not as a
// failed call.
func TestParseAnswerIsBoundedOnTheWire(t *testing.T) {
	t.Run("many unparsed blocks", func(t *testing.T) {
		var p toolformat.Parsed
		reason := strings.Repeat("r", 3000)
		for range 700_000 {
			p.Unparsed = append(p.Unparsed, toolformat.Unparsed{Text: "<tool_call>x</tool_call>", Reason: "invalid JSON at offset 11"})
		}
		p.Unparsed[0].Reason = reason
		p.Unparsed[1].Text = reason
		p.Calls = []toolformat.Call{{Name: "ok", Arguments: json.RawMessage(`{}`)}}
		got, err := sdktest.ToolFormat(t, floodFormat{p}).Parse(context.Background(), "reply", nil)
		if err != nil {
			t.Fatalf("Parse of 700,000 unparsed blocks failed on the wire: %v", err)
		}
		if len(got.Unparsed) != toolformat.MaxUnparsedSent || got.UnparsedOmitted != 700_000-toolformat.MaxUnparsedSent {
			t.Fatalf("%d unparsed sent, %d omitted; want %d and the rest counted", len(got.Unparsed), got.UnparsedOmitted, toolformat.MaxUnparsedSent)
		}
		if len(got.Unparsed[0].Reason) > 1100 || len(got.Unparsed[1].Text) > 1100 || !strings.HasPrefix(got.Unparsed[0].Reason, "rrr") {
			t.Errorf("a long reason or text should be cut to about 1 KiB: %d, %d bytes", len(got.Unparsed[0].Reason), len(got.Unparsed[1].Text))
		}
		if len(got.Calls) != 1 || got.CallsOmitted != 0 {
			t.Errorf("the good call: %+v, %d omitted", got.Calls, got.CallsOmitted)
		}
	})
	t.Run("calls too large together", func(t *testing.T) {
		var p toolformat.Parsed
		args := json.RawMessage(`{"s": "` + strings.Repeat("a", 2<<20) + `"}`)
		for range 40 {
			p.Calls = append(p.Calls, toolformat.Call{Name: "big", Arguments: args})
		}
		got, err := sdktest.ToolFormat(t, floodFormat{p}).Parse(context.Background(), "reply", nil)
		if err != nil {
			t.Fatalf("Parse of 80 MiB of calls failed on the wire: %v", err)
		}
		if len(got.Calls) == 0 || len(got.Calls)+got.CallsOmitted != 40 || len(got.Calls)*(2<<20) > sdk.MaxMessageBytes/2 {
			t.Fatalf("%d calls sent, %d omitted", len(got.Calls), got.CallsOmitted)
		}
	})
}
