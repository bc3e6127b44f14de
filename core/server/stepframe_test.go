package server

import (
	"strings"
	"testing"
)

var stepFrameSeeds = []string{
	`{"type":"step","data":{"reply":"done"}}`,
	` { "data" : { "reply" : "a\nb" } , "type" : "step" } ` + "\n",
	`{"type":"step","data":{"reply":"<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": 1}}\n</tool_call><|im_end|>"}}`,
	`{"type":"st\u0065p","data":{"reply":"\u00e9\u00E9 é \ud83d\ude00 \/ \\ \b\f\r\t"}}`,
	`{"type":"step","data":{"reply":"\ud800"}}`, `{"type":"step","data":{"reply":"\ud800\u0041"}}`,
	`{"type":"step","data":{"reply":"\udc00\ud800"}}`, `{"type":"step","data":{"reply":"\ud83d\ud83d\ude00"}}`,
	"{\"type\":\"step\",\"data\":{\"reply\":\"a\xffb\xc3\"}}", "{\"type\":\"step\",\"data\":{\"reply\":\"\xed\xa0\x80\"}}",
	"{\"type\":\"step\",\"data\":{\"reply\":\"tab\there\"}}", "{\"type\":\"step\",\"data\":{\"reply\":\"\x01\"}}",
	`{"type":"step","data":{"reply":"x"}} {}`, `{"type":"step","data":{"reply":"x"},}`, `{"type":"step","data":{"reply":"x"}`,
	`{"type":"step","type":"step","data":{"reply":"x"}}`, `{"type":"step","data":{"reply":"x","reply":"y"}}`,
	`{"Type":"step","data":{"reply":"x"}}`, `{"type":"step","data":{"Reply":"x"}}`, `{"t\u0079pe":"step","data":{"reply":"x"}}`,
	`{"type":"step","data":null}`, `{"type":"step","data":{}}`, `{"type":"step","data":{"reply":null}}`,
	`{"type":"step","data":{"reply":7}}`, `{"type":"step"}`, `{"type":"reset","data":{"reply":"x"}}`,
	`{"type":"step","data":{"reply":"\x"}}`, `{"type":"step","data":{"reply":"\u12"}}`, `{"type":"step","data":{"reply":"\u12G4"}}`,
	`{"type":"step","data":{"reply":"x"},"extra":1}`, `{"type":"step","data":{"reply":"x","seed":1}}`,
}

// The one-pass step reader agrees with the long way on every frame it
// takes, and takes the frames trainers send.
func FuzzQuickStep(f *testing.F) {
	for _, s := range append(stepFrameSeeds, fuzzSeeds...) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		reply, ok := quickStep(frame)
		if !ok {
			return
		}
		msg, werr := readInbound(frame)
		if werr != nil || msg.Type != "step" {
			t.Fatalf("quickStep took %q, the long way refuses it: %+v %v", frame, msg, werr)
		}
		want, werr := parseStep(msg.Data, msg.HasData)
		if werr != nil {
			t.Fatalf("quickStep took %q, parseStep refuses it: %v", frame, werr)
		}
		if reply != want {
			t.Fatalf("quickStep(%q) = %q, the long way reads %q", frame, reply, want)
		}
	})
}

func TestQuickStepTakesTrainerFrames(t *testing.T) {
	for _, s := range stepFrameSeeds[:10] {
		if _, ok := quickStep([]byte(s)); !ok {
			t.Errorf("quickStep left %s to the long way", s)
		}
	}
	big := `{"type":"step","data":{"reply":"` + strings.Repeat(`ab\n\"c\u00e9`, 100000) + `"}}`
	if _, ok := quickStep([]byte(big)); !ok {
		t.Error("quickStep left a long reply to the long way")
	}
}
