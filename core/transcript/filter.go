package transcript

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/agentenv/agentenv/core/episode"
)

// Filter picks records; its zero value picks all.
type Filter struct {
	// Task is a task id or a glob over ids, where * matches any text
	// (slashes too) and ? one character: "day/*".
	Task      string
	Split     string
	Outcome   episode.Outcome
	Cause     episode.Cause
	EpisodeID string
	// MinReward and MaxReward bound the reward, both ends included; a
	// record without a reward passes no bound.
	MinReward, MaxReward *float64

	task *regexp.Regexp
}

// Check refuses a filter that could never match as meant: an unknown
// outcome or cause, a reward range upside down.
func (f *Filter) Check() error {
	if f.Outcome != "" {
		switch f.Outcome {
		case episode.OutcomeDone, episode.OutcomeFailed, episode.OutcomeAbandoned:
		default:
			return fmt.Errorf("outcome %q: want done, failed or abandoned", f.Outcome)
		}
	}
	if f.Cause != "" {
		known := false
		names := make([]string, len(episode.Causes))
		for i, c := range episode.Causes {
			known = known || c == f.Cause
			names[i] = string(c)
		}
		if !known {
			return fmt.Errorf("cause %q: want one of %s", f.Cause, strings.Join(names, ", "))
		}
	}
	if f.MinReward != nil && f.MaxReward != nil && *f.MinReward > *f.MaxReward {
		return fmt.Errorf("reward range %g to %g is empty: the least reward is over the most", *f.MinReward, *f.MaxReward)
	}
	f.task = nil
	if f.Task != "" {
		f.task = globRegexp(f.Task)
	}
	return nil
}

// globRegexp matches the whole text against glob (* any text, ? one
// character).
func globRegexp(glob string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString("^")
	for _, r := range glob {
		switch r {
		case '*':
			b.WriteString(".*")
		case '?':
			b.WriteString(".")
		default:
			b.WriteString(regexp.QuoteMeta(string(r)))
		}
	}
	b.WriteString("$")
	return regexp.MustCompile(b.String())
}

// Match says whether r passes every bound of f. Call Check first.
func (f *Filter) Match(r *Record) bool {
	if f.task == nil && f.Task != "" {
		f.task = globRegexp(f.Task)
	}
	if f.task != nil && !f.task.MatchString(r.TaskID) {
		return false
	}
	if (f.Split != "" && r.Split != f.Split) || (f.Outcome != "" && r.Outcome != f.Outcome) ||
		(f.Cause != "" && r.Cause != f.Cause) || (f.EpisodeID != "" && r.EpisodeID != f.EpisodeID) {
		return false
	}
	if f.MinReward != nil || f.MaxReward != nil {
		v, ok := r.Score()
		if !ok || (f.MinReward != nil && v < *f.MinReward) || (f.MaxReward != nil && v > *f.MaxReward) {
			return false
		}
	}
	return true
}
