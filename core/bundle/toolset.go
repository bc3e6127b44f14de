package bundle

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sort"
)

// toolsetSpec is what decides the tools a task's turns offer; its JSON is
// the toolset's key and its hash the toolset's id.
type toolsetSpec struct {
	Envs    []string   `json:"envs"`
	Turns   [][]string `json:"turns"`
	Hidden  []string   `json:"hidden"`
	EndTurn bool       `json:"end_turn"`
}

func toolsetOf(steps []Step) toolsetSpec {
	ts := toolsetSpec{Envs: []string{}, Turns: [][]string{}, Hidden: []string{}}
	for i := range steps {
		s := &steps[i]
		switch s.Type {
		case StepDeployEnv:
			ts.Envs = append(ts.Envs, s.Env)
		case StepPromptAgent:
			ts.Turns = append(ts.Turns, s.Tools) // nil = default
		case StepCallTool, StepVerifyTool:
			h := s.Env + "/" + s.Tool
			if !contains(ts.Hidden, h) {
				ts.Hidden = append(ts.Hidden, h)
			}
		}
	}
	sort.Strings(ts.Hidden)
	ts.EndTurn = len(ts.Turns) > 1
	return ts
}

// toolsetKey is the canonical text of a task's toolset.
func toolsetKey(steps []Step) string {
	b, _ := json.Marshal(toolsetOf(steps)) // plain strings and slices: cannot fail
	return string(b)
}

func toolsetID(key string) string {
	sum := sha256.Sum256([]byte(key))
	return "ts-" + hex.EncodeToString(sum[:6])
}

// toolsetDyn reports whether seeds can change the toolset, so it must be
// worked out per task rather than once per family.
func (t *taskTmpl) toolsetDyn() bool {
	for i := range t.steps {
		st := &t.steps[i]
		switch st.typ {
		case StepDeployEnv, StepCallTool, StepVerifyTool:
			if st.dyn&(fEnv|fTool) != 0 {
				return true
			}
		case StepPromptAgent:
			if st.dyn&fTools != 0 {
				return true
			}
		}
	}
	return false
}

// assignToolsets replaces each task's toolset key by its id and collects
// the toolsets in order of first use.
func (b *Bundle) assignToolsets() {
	b.tsIndex = map[string]int{}
	byKey := map[string]int{}
	for _, t := range b.Tasks {
		i, ok := byKey[t.Toolset]
		if !ok {
			spec := toolsetOf(t.Steps)
			i = len(b.toolsets)
			byKey[t.Toolset] = i
			id := toolsetID(t.Toolset)
			b.tsIndex[id] = i
			b.toolsets = append(b.toolsets, Toolset{ID: id, Envs: spec.Envs, Turns: spec.Turns,
				Hidden: spec.Hidden, EndTurn: spec.EndTurn, Task: t})
		}
		b.toolsets[i].Count++
		t.Toolset = b.toolsets[i].ID
	}
}
