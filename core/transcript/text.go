package transcript

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/agentenv/agentenv/core/episode"
)

// WriteText writes r as a conversation a person reads: a header (task,
// outcome, reward, scores, phase times), then each message under its
// role, each reply with the calls read from it and those that could not
// be, with why.
func WriteText(w io.Writer, r *Record) error {
	bw := bufio.NewWriter(w)
	p := func(format string, a ...any) { fmt.Fprintf(bw, format, a...) }
	p("episode %s · task %s", r.EpisodeID, r.TaskID)
	if r.Index != nil {
		p(" (split %s, index %d)", r.Split, *r.Index)
	}
	if r.ToolFormat != "" {
		p(" · %s", r.ToolFormat)
	}
	if r.Sandbox != "" {
		p(" · sandbox %s", r.Sandbox)
	}
	if r.Bundle != "" {
		p(" · bundle %s", r.Bundle)
	}
	p("\n%s (%s, %s)", r.Outcome, r.Cause, r.Source)
	if v, ok := r.Score(); ok {
		p(" · reward %g", v)
	}
	if len(r.Scores) > 0 {
		var s []string
		for _, id := range sortedKeys(r.Scores) {
			s = append(s, fmt.Sprintf("%s=%g", id, r.Scores[id]))
		}
		p(" · scores %s", strings.Join(s, " "))
	}
	if r.TurnsOmitted > 0 {
		p(" · %d turns (%d more not kept)\n", len(r.Turns)+r.TurnsOmitted, r.TurnsOmitted)
	} else {
		p(" · %d turns\n", len(r.Turns))
	}
	if r.Error != "" {
		p("error: %s\n", r.Error)
	}
	p("started %s · took %s\n", r.Started.UTC().Format(time.RFC3339), r.Ended.Sub(r.Started).Round(time.Millisecond))
	var times []string
	for _, ph := range episode.Phases {
		if v := r.Times[string(ph)]; v > 0 {
			times = append(times, fmt.Sprintf("%s %s", ph, seconds(v)))
		}
	}
	if len(times) > 0 {
		p("times: %s\n", strings.Join(times, ", "))
	}
	if len(r.Tools) > 0 {
		names := make([]string, len(r.Tools))
		for i, t := range r.Tools {
			names[i] = t.Name
		}
		p("tools: %s\n", strings.Join(names, ", "))
	}
	for _, m := range r.Prompt {
		block(bw, m.Role, "", m.Content)
	}
	for i, t := range r.Turns {
		block(bw, "assistant", fmt.Sprintf("turn %d, %s", i+1, seconds(t.StepS)), t.Reply)
		for _, c := range t.Calls {
			p("  ▸ call read: %s %s\n", c.Name, oneLine(string(c.Arguments), 200))
		}
		for _, u := range t.Unparsed {
			p("  ▸ call unreadable: %s\n", u.Reason)
		}
		if n := t.UnparsedOmitted + t.CallsOmitted; n > 0 {
			p("  ▸ %d more calls not sent by the tool format\n", n)
		}
		for _, m := range t.Messages {
			block(bw, m.Role, "", m.Content)
		}
	}
	if r.TurnsOmitted > 0 {
		p("  ▸ %d later turns were not kept: the episode's transcript was full (serve --transcript-bytes)\n", r.TurnsOmitted)
	}
	return bw.Flush()
}

func block(w io.Writer, role, note, content string) {
	if note != "" {
		fmt.Fprintf(w, "\n── %s (%s)\n", role, note)
	} else {
		fmt.Fprintf(w, "\n── %s\n", role)
	}
	content = strings.TrimRight(content, "\n")
	if content == "" {
		content = "(empty)"
	}
	fmt.Fprintln(w, content)
}

func seconds(v float64) string {
	d := time.Duration(v * float64(time.Second))
	if d < time.Millisecond {
		return d.Round(time.Microsecond).String()
	}
	return d.Round(time.Millisecond).String()
}

// oneLine is s on one line, cut to n bytes.
func oneLine(s string, n int) string {
	var compact bytes.Buffer
	if json.Compact(&compact, []byte(s)) == nil {
		s = compact.String()
	}
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > n {
		return clip(s, n) + "…"
	}
	return s
}

func sortedKeys(m map[string]float64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
