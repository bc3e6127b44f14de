package toolformat_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/agentenv/agentenv/sdk"
	"github.com/agentenv/agentenv/sdk/sdktest"
	"github.com/agentenv/agentenv/sdk/toolformat"
)

// failFormat fails every parse with err.
type failFormat struct{ err error }

func (f failFormat) Info() sdk.Info { return floodFormat{}.Info() }

func (f failFormat) Parse(context.Context, string, []toolformat.Tool) (toolformat.Parsed, error) {
	return toolformat.Parsed{}, f.err
}

// A tool format run in the host's process (Local) answers exactly as the
// same plugin does over gRPC: the same bounds, the same repair of
// invalid UTF-8, the same errors, the same Info.
func TestLocalAnswersAsTheWire(t *testing.T) {
	var flood toolformat.Parsed
	for i := range 200 {
		flood.Unparsed = append(flood.Unparsed, toolformat.Unparsed{Text: strings.Repeat("é", 700), Reason: fmt.Sprintf("reason %d \xff", i)})
	}
	var big toolformat.Parsed
	for range 40 {
		big.Calls = append(big.Calls, toolformat.Call{Name: "big", Arguments: json.RawMessage(`{"s":"` + strings.Repeat("a", 1<<20) + `"}`)})
	}
	cases := []struct {
		name  string
		impl  toolformat.Plugin
		reply string
	}{
		{"plain", floodFormat{toolformat.Parsed{Content: "hi", Calls: []toolformat.Call{{Name: "f", Arguments: json.RawMessage(`{"a": 1}`)}}}}, "reply"},
		{"invalid UTF-8 out", floodFormat{toolformat.Parsed{Content: "cut \xe2\x82", Calls: []toolformat.Call{{Name: "f\xff", Arguments: json.RawMessage(`{}`)}}}}, "reply"},
		{"unparsed flood", floodFormat{flood}, "reply"},
		{"calls too large together", floodFormat{big}, "reply"},
		{"not found", failFormat{fmt.Errorf("no such thing: %w", sdk.ErrNotFound)}, "reply"},
		{"plain error", failFormat{errors.New("parser broke")}, "reply"},
	}
	ctx := context.Background()
	set := toolformat.NewToolSet([]toolformat.Tool{{Name: "f", Parameters: json.RawMessage(`{"type":"object"}`)}})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wire, wireErr := sdktest.ToolFormat(t, c.impl).ParseSet(ctx, c.reply, set)
			local, localErr := toolformat.NewLocal(c.impl, nil).ParseSet(ctx, c.reply, set)
			if !reflect.DeepEqual(wire, local) {
				t.Errorf("answers differ:\nwire  %.300v\nlocal %.300v", wire, local)
			}
			if fmt.Sprint(wireErr) != fmt.Sprint(localErr) || errors.Is(wireErr, sdk.ErrNotFound) != errors.Is(localErr, sdk.ErrNotFound) {
				t.Errorf("errors differ: wire %v, local %v", wireErr, localErr)
			}
		})
	}
	info, err := toolformat.NewLocal(floodFormat{}, nil).RemoteInfo(ctx)
	wireInfo, wireErr := sdktest.ToolFormat(t, floodFormat{}).RemoteInfo(ctx)
	if err != nil || wireErr != nil || !reflect.DeepEqual(info, wireInfo) {
		t.Errorf("Info: local %+v (%v), wire %+v (%v)", info, err, wireInfo, wireErr)
	}
	if err := toolformat.NewLocal(floodFormat{}, nil).Configure(ctx, json.RawMessage(`{"x":1}`)); err == nil || err.Error() != fmt.Sprint(sdktest.ToolFormat(t, floodFormat{}).Configure(ctx, json.RawMessage(`{"x":1}`))) {
		t.Errorf("Configure of a plugin without settings: %v", err)
	}
}

// A panic in a parser run in the host's process is that parse's error,
// with no source path in it.
func TestLocalRecoversPanic(t *testing.T) {
	p := toolformat.NewLocal(panicFormat{}, nil)
	_, err := p.Parse(context.Background(), "x", nil)
	if err == nil || !strings.Contains(err.Error(), "panicked: runtime error: index out of range") || strings.Contains(err.Error(), ".go") {
		t.Fatalf("panic: %v", err)
	}
}

type panicFormat struct{ floodFormat }

func (panicFormat) Parse(context.Context, string, []toolformat.Tool) (toolformat.Parsed, error) {
	var s []int
	_ = s[len(s)]
	return toolformat.Parsed{}, nil
}

// stuckFormat never returns until released, whatever its context says.
type stuckFormat struct {
	floodFormat
	release chan struct{}
}

func (f stuckFormat) Parse(context.Context, string, []toolformat.Tool) (toolformat.Parsed, error) {
	<-f.release
	return toolformat.Parsed{}, nil
}

// An in-process parse returns when its step ends (cancelled, or out of
// its time), even if the parser ignores its context: it held the step,
// and its slot, for as long as the parser ran.
func TestLocalParseEndsWithItsContext(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	p := toolformat.NewLocal(stuckFormat{release: release}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := p.Parse(ctx, "x", nil); done <- err }()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("a parse whose step was cancelled: %v, want context.Canceled", err)
	}
}
