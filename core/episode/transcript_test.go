package episode_test

import (
	"context"
	"encoding/json"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/agentenv/agentenv/core/episode"
	"github.com/agentenv/agentenv/sdk"
	"github.com/agentenv/agentenv/sdk/toolformat"
)

// With Transcripts on, the final Result holds the opening prompt, the
// tools, and each reply with the calls read, those that could not be and
// why, and the messages that answered it; with it off, none of that.
func TestResultTranscript(t *testing.T) {
	for _, tc := range []struct {
		name string
		keep bool
	}{{"kept", true}, {"off", false}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := bundleFiles(t, nil, map[string]string{"tasks/puzzle.json": puzzleTask(5, 2)})
			rec := newRecorder()
			r := newRig(t, dir, rigOptions{tune: func(c *episode.Config) { c.Observer, c.Transcripts = rec, tc.keep }})
			zero := 0
			ep := r.play(episode.Request{Split: "all", Index: &zero})
			r.start(ep)
			r.step(ep, "Let me add. "+call("add", map[string]any{"n": 3})+"\n<tool_call>\n{not json\n</tool_call>")
			if obs := r.step(ep, "I reached 5."); !obs.Done {
				t.Fatalf("not done: %+v", obs)
			}
			if err := ep.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			res := rec.result(t, ep.ID())
			if res.Split != "all" || res.Index == nil || *res.Index != 0 || res.ToolFormat != "hermes" || res.Ended.Before(res.Began) {
				t.Errorf("split %q index %v format %q began %v ended %v", res.Split, res.Index, res.ToolFormat, res.Began, res.Ended)
			}
			if !tc.keep {
				if res.Transcript != nil {
					t.Fatalf("transcript kept with Transcripts off: %+v", res.Transcript)
				}
				return
			}
			tr := res.Transcript
			if tr == nil {
				t.Fatal("no transcript")
			}
			if len(tr.Prompt) != 2 || tr.Prompt[0].Role != "system" || tr.Prompt[1].Content != "Reach the target." {
				t.Errorf("prompt %+v", tr.Prompt)
			}
			if len(tr.Tools) == 0 {
				t.Error("no tools kept")
			}
			if len(tr.Exchanges) != 2 {
				t.Fatalf("%d exchanges, want 2: %+v", len(tr.Exchanges), tr.Exchanges)
			}
			first := tr.Exchanges[0]
			if !strings.HasPrefix(first.Reply, "Let me add.") || len(first.Parsed.Calls) != 1 || first.Parsed.Calls[0].Name != "add" {
				t.Errorf("first exchange: reply %q calls %+v", first.Reply, first.Parsed.Calls)
			}
			if len(first.Parsed.Unparsed) != 1 || first.Parsed.Unparsed[0].Reason == "" {
				t.Errorf("unparsed %+v", first.Parsed.Unparsed)
			}
			if len(first.Messages) != 2 || first.Messages[0].Role != "tool" || first.Took <= 0 {
				t.Errorf("answer %+v took %v", first.Messages, first.Took)
			}
			var sawError bool
			for _, m := range first.Messages {
				sawError = sawError || strings.Contains(m.Content, "could not be read")
			}
			if !sawError {
				t.Errorf("no message tells of the unreadable call: %+v", first.Messages)
			}
			if last := tr.Exchanges[1]; last.Reply != "I reached 5." || len(last.Parsed.Calls) != 0 {
				t.Errorf("last exchange %+v", last)
			}
		})
	}
}

// A reply whose step fails (the env crashed under its call) is kept in
// the transcript unanswered, and the episode's record says why it failed.
func TestResultTranscriptFailedStep(t *testing.T) {
	dir := bundleFiles(t, map[string]string{"TESTENV_CHILD": "1"}, map[string]string{"tasks/puzzle.json": puzzleTask(5, 2)})
	rec := newRecorder()
	r := newRig(t, dir, rigOptions{tune: func(c *episode.Config) { c.Observer, c.Transcripts = rec, true }})
	ep := r.play(episode.Request{TaskID: "puzzle"})
	r.start(ep)
	reply := call("crash", map[string]any{})
	if _, err := ep.Step(context.Background(), reply); err == nil {
		t.Fatal("the crash call did not fail the step")
	}
	if err := ep.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	res := rec.result(t, ep.ID())
	if res.Outcome != episode.OutcomeFailed || res.Cause != episode.CauseEnvCrashed || res.Transcript == nil {
		t.Fatalf("outcome %s cause %s transcript %v", res.Outcome, res.Cause, res.Transcript)
	}
	x := res.Transcript.Exchanges
	if len(x) != 1 || x[0].Reply != reply || len(x[0].Parsed.Calls) != 1 || x[0].Messages != nil {
		t.Errorf("exchanges %+v: want the reply, its call, no answer", x)
	}
}

// BenchmarkTranscriptStep measures a step with Config.Transcripts on
// against the same step with it off, alternating in one run: on/off is
// what keeping transcripts costs a step (off is the floor; off itself
// only checks a nil pointer).
func BenchmarkTranscriptStep(b *testing.B) {
	dir := bundleFiles(b, nil, map[string]string{"tasks/puzzle.json": puzzleTask(5, 2)})
	ctx := context.Background()
	play := func(keep bool) episode.Episode {
		r := newRig(b, dir, rigOptions{tune: func(c *episode.Config) { c.Transcripts = keep }})
		ep, err := r.engine.Play(episode.Request{TaskID: "puzzle"})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := ep.Start(ctx); err != nil {
			b.Fatal(err)
		}
		return ep
	}
	off, on := play(false), play(true)
	// Both close before either rig checks nothing is left (the rigs share
	// the instance label).
	b.Cleanup(func() { _, _ = off.Close(ctx), on.Close(ctx) })
	reply := "Let me echo.\n" + call("echo", map[string]any{"text": "hi"}) + "<|im_end|>"
	var tOff, tOn time.Duration
	n := 0
	for b.Loop() {
		t0 := time.Now()
		if _, err := off.Step(ctx, reply); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if _, err := on.Step(ctx, reply); err != nil {
			b.Fatal(err)
		}
		tOff += t1.Sub(t0)
		tOn += time.Since(t1)
		n++
	}
	b.ReportMetric(float64(tOff.Microseconds())/float64(n), "off-µs/step")
	b.ReportMetric(float64(tOn.Microseconds())/float64(n), "on-µs/step")
	b.ReportMetric(float64(tOn)/float64(tOff), "on/off")
}

// What a live episode keeps for its transcript is bounded per turn and
// per episode: a long reply, long call arguments and long results are cut
// with a note saying so, and once the episode's budget is spent later
// turns are only counted. Every reply was kept whole: 24 steps of 15 MiB
// held 635 MiB, and one 40-step episode took a server to 3.6 GB.
func TestTranscriptIsBounded(t *testing.T) {
	const turnBytes, episodeBytes = 64 << 10, 160 << 10
	dir := bundleFiles(t, nil, map[string]string{"tasks/puzzle.json": puzzleTask(5, 2)})
	rec := newRecorder()
	r := newRig(t, dir, rigOptions{tune: func(c *episode.Config) {
		c.Observer, c.Transcripts = rec, true
		c.Limits.TranscriptTurnBytes, c.Limits.TranscriptBytes = turnBytes, episodeBytes
	}})
	ep := r.play(episode.Request{TaskID: "puzzle"})
	r.start(ep)
	long := strings.Repeat("x", 200<<10)
	r.step(ep, long+call("add", map[string]any{"n": long}))
	r.step(ep, call("flood", map[string]any{"bytes": 100 << 10, "char": "y"}))
	for range 6 {
		r.step(ep, long[:100<<10]+call("add", map[string]any{"n": 0}))
	}
	if obs := r.step(ep, "I am done."); !obs.Done {
		t.Fatalf("not done: %+v", obs)
	}
	if err := ep.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	tr := rec.result(t, ep.ID()).Transcript
	if tr == nil || len(tr.Exchanges) < 2 {
		t.Fatalf("transcript %+v", tr)
	}
	first := tr.Exchanges[0]
	if len(first.Reply) > turnBytes+400 || !strings.Contains(first.Reply, "[agentenv: the transcript keeps") {
		t.Errorf("a 200 KiB reply was kept as %d bytes, ending %q", len(first.Reply), tail(first.Reply))
	}
	if args := string(first.Parsed.Calls[0].Arguments); len(args) > 400 || !strings.Contains(args, "not kept") {
		t.Errorf("200 KiB of arguments past the turn's room kept as %d bytes: %.200s", len(args), args)
	}
	if msg := tr.Exchanges[1].Messages[0].Content; len(msg) > turnBytes+400 || !strings.Contains(msg, "[agentenv: the transcript keeps") {
		t.Errorf("a 100 KiB result was kept as %d bytes, ending %q", len(msg), tail(msg))
	}
	size := 0
	for _, x := range tr.Exchanges {
		size += len(x.Reply) + len(x.Parsed.Content)
		for _, m := range x.Messages {
			size += len(m.Content)
		}
		for _, c := range x.Parsed.Calls {
			size += len(c.Arguments)
		}
	}
	if size > episodeBytes+len(tr.Exchanges)*2000 {
		t.Errorf("the transcript holds %d KiB, want about %d KiB at most", size>>10, episodeBytes>>10)
	}
	if tr.TurnsOmitted == 0 || len(tr.Exchanges)+tr.TurnsOmitted != 9 {
		t.Errorf("%d turns kept and %d counted as not kept, want 9 together, some not kept", len(tr.Exchanges), tr.TurnsOmitted)
	}
}

func tail(s string) string { return s[max(0, len(s)-200):] }

// sliceNamer reads one call per reply whose name is a slice of the reply,
// as a parser that does not copy (qwen3_coder) returns it.
type sliceNamer struct{}

func (sliceNamer) Info() sdk.Info {
	return sdk.Info{Name: "slices", Kind: sdk.KindToolFormat, Version: "1", Protocols: []int{sdk.ProtocolVersion}}
}

func (sliceNamer) Parse(_ context.Context, text string, _ []toolformat.Tool) (toolformat.Parsed, error) {
	i := strings.Index(text, "add")
	return toolformat.Parsed{Content: text[:i], Calls: []toolformat.Call{{Name: text[i : i+3], Arguments: json.RawMessage(`{"n": 0}`)}},
		Unparsed: []toolformat.Unparsed{{Text: text[i:], Reason: "r"}}}, nil
}

// What the transcript keeps of a reply holds none of the reply itself: a
// call's name, sliced from a 15 MiB reply, kept every reply alive (24
// steps held 120 MiB with 8 MiB of transcript).
func TestTranscriptHoldsNoReply(t *testing.T) {
	dir := bundleFiles(t, nil, map[string]string{"tasks/puzzle.json": puzzleTask(5, 2)})
	r := newRig(t, dir, rigOptions{tune: func(c *episode.Config) {
		c.Transcripts = true
		c.ToolFormat = func(string) (toolformat.Parser, error) { return toolformat.NewLocal(sliceNamer{}, nil), nil }
	}})
	ep := r.play(episode.Request{TaskID: "puzzle"})
	r.start(ep)
	heap := func() uint64 {
		var ms runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	base := heap()
	for range 24 {
		r.step(ep, strings.Repeat("x", 4<<20)+"add")
	}
	if grew := int64(heap()-base) >> 20; grew > 24 {
		t.Errorf("after 24 replies of 4 MiB the heap holds %d MiB more, want about the transcript's 8 MiB", grew)
	}
}
