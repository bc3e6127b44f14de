package bundle

import (
	"fmt"
	"strings"
)

// RewardScorePrefix starts a reward spec that picks one verifier's score:
// "score:<step id>".
const RewardScorePrefix = "score:"

// CheckReward checks that every task can be rewarded under spec:
//   - "" (no reward given): every task must have exactly one verifier step;
//     tasks with several are refused, named.
//   - "score:<step id>": every task must have a verifier step of that id.
//   - anything else names a reward plugin, which combines any scores.
func (b *Bundle) CheckReward(spec string) error {
	var bad []string
	var why string
	switch {
	case spec == "":
		why = "several verifier steps and no reward is given (use --reward <plugin> or --reward score:<step id>)"
		for _, t := range b.Tasks {
			if n := len(t.Verifiers()); n > 1 {
				bad = append(bad, t.ID)
			}
		}
	case strings.HasPrefix(spec, RewardScorePrefix):
		id := strings.TrimPrefix(spec, RewardScorePrefix)
		if id == "" {
			return fmt.Errorf("reward %q: no step id after %q", spec, RewardScorePrefix)
		}
		why = fmt.Sprintf("no verifier step %q (reward %q)", id, spec)
		for _, t := range b.Tasks {
			if s := t.Step(id); s == nil || !s.IsVerifier() {
				bad = append(bad, t.ID)
			}
		}
	default:
		return nil
	}
	if len(bad) == 0 {
		return nil
	}
	verb := "have"
	if len(bad) == 1 {
		verb = "has"
	}
	return fmt.Errorf("bundle %s: %s %s %s", b.Name, nameTasks(bad), verb, why)
}

// nameTasks names the first few tasks and counts the rest.
func nameTasks(ids []string) string {
	const show = 5
	if len(ids) == 1 {
		return "task " + ids[0]
	}
	head := ids
	if len(head) > show {
		head = head[:show]
	}
	s := fmt.Sprintf("%d tasks (%s", len(ids), strings.Join(head, ", "))
	if len(ids) > show {
		s += fmt.Sprintf(", and %d more", len(ids)-show)
	}
	return s + ")"
}
