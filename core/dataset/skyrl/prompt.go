package skyrl

import (
	"errors"
	"fmt"
	"strings"
)

// systemMarker stands in for the system message's text, to find where
// the template puts that text in the system turn.
const systemMarker = "AGENTENV-SYSTEM-TEXT-2f9c41d7"

// ErrToolsOutsideSystem is a template that renders tools= elsewhere than
// in the system turn (a user message, the generation prompt), which a
// system message cannot reproduce.
var ErrToolsOutsideSystem = errors.New("the chat template renders the tools outside the system turn")

// ErrRenderMismatch is a prompt whose tools, moved into its system
// message, render differently from tools=.
var ErrRenderMismatch = errors.New("the prompt with its tools in the system message renders differently from the prompt rendered with tools=")

// Prompt is a task's prompt with its tools in the system message.
type Prompt struct {
	Messages []Message
	// Text is the rendered prompt as SkyRL's generator renders it (with
	// the template kwargs); FilterText as its prompt-length filter does
	// (without them).
	Text, FilterText string
}

// TaskPrompt is task id's opening prompt (of toolset) with its tools in
// the system message: what `agentenv skyrl rows` writes as the row's
// prompt and what `agentenv eval` sends the model. Errors name the task.
func (t *ChatTemplate) TaskPrompt(id, toolset string, prompt []Message, tools Tools, kwargs Kwargs) (Prompt, error) {
	if len(prompt) == 0 {
		return Prompt{}, fmt.Errorf("task %s has no prompt", id)
	}
	for _, m := range prompt {
		if strings.Contains(m.Content, holeStart) || strings.Contains(m.Role, holeStart) {
			return Prompt{}, fmt.Errorf("task %s: its prompt holds U+E000, which the writer uses as a marker", id)
		}
	}
	p, err := t.WithTools(prompt, tools, kwargs)
	if err != nil {
		return Prompt{}, fmt.Errorf("task %s (toolset %s): %w", id, toolset, err)
	}
	return p, nil
}

// WithTools moves tools into the system message of messages: its text
// becomes the system text the template renders for tools= (the template
// may add a default system line when there is no system message). The
// prompt is rendered both ways, with kwargs; they must be byte-equal.
func (t *ChatTemplate) WithTools(messages []Message, tools Tools, kwargs Kwargs) (Prompt, error) {
	if tools.Len() == 0 {
		text, err := t.Render(messages, Tools{}, true, kwargs)
		if err != nil {
			return Prompt{}, err
		}
		filter, err := t.Render(messages, Tools{}, true, Kwargs{})
		return Prompt{Messages: messages, Text: text, FilterText: filter}, err
	}
	want, err := t.Render(messages, tools, true, kwargs)
	if err != nil {
		return Prompt{}, fmt.Errorf("render with tools=: %w", err)
	}
	rest := messages
	if len(messages) > 0 && messages[0].Role == "system" {
		rest = messages[1:]
	}
	marked := append([]Message{{Role: "system", Content: systemMarker}}, rest...)
	frame, err := t.Render(marked, Tools{}, true, kwargs)
	if err != nil {
		return Prompt{}, fmt.Errorf("render with a system message: %w", err)
	}
	before, after, ok := strings.Cut(frame, systemMarker)
	if !ok || strings.Contains(after, systemMarker) {
		return Prompt{}, errors.New("the chat template does not print the system message's text once as it is, so the tools cannot be moved into it")
	}
	if !strings.HasPrefix(want, before) {
		return Prompt{}, fmt.Errorf("%w (before the system text): %s", ErrToolsOutsideSystem, Diff("tools=", want, "a system message", frame))
	}
	if !strings.HasSuffix(want, after) || len(want) < len(before)+len(after) {
		return Prompt{}, fmt.Errorf("%w (after the system text): %s", ErrToolsOutsideSystem, afterDiff(want, len(before), messages, after, len(frame)-len(after)))
	}
	system := want[len(before) : len(want)-len(after)]
	moved := append([]Message{{Role: "system", Content: system}}, rest...)
	got, err := t.Render(moved, Tools{}, true, kwargs)
	if err != nil {
		return Prompt{}, fmt.Errorf("render with the tools in the system message: %w", err)
	}
	if got != want {
		return Prompt{}, fmt.Errorf("%w: %s", ErrRenderMismatch, Diff("tools=", want, "the system message", got))
	}
	filter, err := t.Render(moved, Tools{}, true, Kwargs{})
	if err != nil {
		return Prompt{}, fmt.Errorf("render without the template kwargs: %w", err)
	}
	return Prompt{Messages: moved, Text: got, FilterText: filter}, nil
}

// afterDiff shows where tools= (want) and the system turn's frame part
// after the system text (after, at byte base of the frame) differ: just
// after the system message's own text when want holds it there, else at
// the last difference.
func afterDiff(want string, start int, messages []Message, after string, base int) string {
	if len(messages) > 0 && messages[0].Role == "system" && messages[0].Content != "" && strings.HasPrefix(want[start:], messages[0].Content) {
		i := start + len(messages[0].Content)
		j := 0
		for i < len(want) && j < len(after) && want[i] == after[j] {
			i, j = i+1, j+1
		}
		return diffAt("tools=", want, i, "a system message", after, j, base)
	}
	k := 0 // the common tail
	for k < len(after) && k < len(want)-start && want[len(want)-1-k] == after[len(after)-1-k] {
		k++
	}
	return diffAt("tools=", want, len(want)-k, "a system message", after, len(after)-k, base)
}

// Diff says where a and b (named na and nb) first differ, with the text
// around it.
func Diff(na, a, nb, b string) string {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	return diffAt(na, a, i, nb, b, i, 0)
}

// diffAt shows a around byte i and b around byte j, where they differ; b
// starts at byte base of its whole text.
func diffAt(na, a string, i int, nb, b string, j, base int) string {
	clip := func(s string, at int) string {
		from := max(0, at-40)
		return fmt.Sprintf("%q", s[from:min(len(s), at+60)])
	}
	line := strings.Count(a[:i], "\n") + 1
	return fmt.Sprintf("they differ at byte %d (line %d) of %s's text, byte %d of %s's: %s gives …%s…, %s gives …%s…",
		i, line, na, base+j, nb, na, clip(a, i), nb, clip(b, j))
}
