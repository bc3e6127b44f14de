// Package policy plays the inbox tasks as a model would, in the
// qwen3_coder tool-call format: a scripted policy that searches, reads and
// answers each question with end_turn, and the two ways the SkyRL page's
// model went wrong: answering in a plain reply instead of end_turn (which
// ends the episode before the second question), and a wrong answer.
//
// The scripted policy knows which email answers each question (its
// scripts below), never the answer itself: it reads that off the env's
// tool answers, so a wrong mailbox or a broken tool fails it.
package policy

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/agentenv/agentenv/examples/inbox/rollout"
)

// Shape is how a policy ends its turns.
type Shape string

const (
	// Scripted answers every question right, with end_turn.
	Scripted Shape = "scripted"
	// Reply answers the first question right, in a plain reply without a
	// tool call, as the SkyRL page's Qwen3.5-2B did. That reply ends its
	// turn and the turns after it, so the episode is over there.
	Reply Shape = "reply"
	// Wrong answers the first question wrongly (with end_turn), the second
	// right.
	Wrong Shape = "wrong"
)

// Shapes lists every shape.
var Shapes = []Shape{Scripted, Reply, Wrong}

// ParseShape reads a shape's name.
func ParseShape(s string) (Shape, error) {
	for _, sh := range Shapes {
		if string(sh) == s {
			return sh, nil
		}
	}
	return "", fmt.Errorf("no policy %q (the policies: scripted, reply, wrong)", s)
}

// WrongAnswer is the Wrong shape's first answer.
const WrongAnswer = "I could not find it."

// Turn is how the scripted policy answers one question. With neither
// Folders nor Search, it answers from the last email it read.
type Turn struct {
	Folders bool   // call list_folders and read the answer off the list
	Search  string // call search_emails with this query, then read_email
	Subject string // the first hit whose subject holds this
	// Answer finds the answer in the last tool answer: its first group.
	Answer *regexp.Regexp
}

var amountDue = regexp.MustCompile(`Amount due: \$([\d,]+\.\d\d)`)

// scripts are the hand-written tasks' (tasks/*.json but invoice.json).
var scripts = map[string][]Turn{
	"acme-invoice": {
		{Search: "acme invoice october", Subject: "October", Answer: regexp.MustCompile(`Invoice: (INV-\d+)`)},
		{Answer: amountDue},
	},
	"lisbon-trip": {
		{Search: "lisbon flight", Subject: "Lisbon", Answer: regexp.MustCompile(`Outbound: flight (SW \d+)`)},
		{Answer: regexp.MustCompile(`booking reference is (\w+)`)},
	},
	"offsite": {
		{Search: "offsite", Subject: "save the date", Answer: regexp.MustCompile(`on (\w+day \d+ \w+ \d{4})`)},
		{Search: "offsite venue", Subject: "change of venue", Answer: regexp.MustCompile(`moves to ([^,]+),`)},
	},
	"refund": {
		{Search: "refund 58213", Subject: "Refund", Answer: regexp.MustCompile(`refunded (\$[\d,]+\.\d\d)`)},
		{Answer: regexp.MustCompile(`card ending in (\d{4})`)},
	},
	"spam": {
		{Folders: true, Answer: regexp.MustCompile(`"folder":"spam","emails":(\d+)`)},
		{Search: "bank suspended", Subject: "suspended", Answer: regexp.MustCompile(`From: [^@\s]+@(\S+)`)},
	},
}

// invoiceQuestion is the first prompt of the seeded family
// (tasks/invoice.json).
var invoiceQuestion = regexp.MustCompile(`of the invoice (.+) sent for (\w+)\?`)

// Script returns the turns that answer task id, whose first prompt is
// prompt.
func Script(id, prompt string) ([]Turn, error) {
	if s, ok := scripts[id]; ok {
		return s, nil
	}
	if strings.HasPrefix(id, "invoice/") {
		m := invoiceQuestion.FindStringSubmatch(prompt)
		if m == nil {
			return nil, fmt.Errorf("task %s: the prompt %q does not ask for a vendor's invoice of a month", id, prompt)
		}
		return []Turn{
			{Search: m[1] + " invoice " + m[2], Subject: m[2], Answer: regexp.MustCompile(`Invoice: (INV-\d+)`)},
			{Answer: amountDue},
		}, nil
	}
	return nil, fmt.Errorf("no script for task %s", id)
}

// New returns the policy of shape for one episode, from its opening
// observation.
func New(shape Shape) rollout.NewPolicy {
	return func(opening rollout.Observation) (rollout.Policy, error) {
		prompt := ""
		for _, m := range opening.Messages {
			if m.Role == "user" {
				prompt = m.Content
			}
		}
		turns, err := Script(opening.TaskID, prompt)
		if err != nil {
			return nil, err
		}
		return &player{shape: shape, turns: turns}, nil
	}
}

// Action is one reply of the policy: a tool call with at most one
// parameter, or, with no Tool, a plain reply whose text is Value.
type Action struct {
	Tool, Param, Value string
}

// Text writes the action as the model's reply, in qwen3_coder.
func (a Action) Text() string {
	switch {
	case a.Tool == "":
		return a.Value + EndOfTurn
	case a.Param == "":
		return Call(a.Tool)
	}
	return Call(a.Tool, a.Param, a.Value)
}

// player walks the script: for each turn, its tool calls one a reply,
// then the answer.
type player struct {
	shape Shape
	turns []Turn
	turn  int    // the turn being played
	phase int    // 0: nothing called yet; 1: searched; 2: the answer's source is in
	last  string // the last tool answer read
	ended bool   // a plain reply was sent: the episode is over
}

func (p *player) Reply(obs rollout.Observation) (string, error) {
	a, err := p.next(obs)
	if err != nil {
		return "", err
	}
	return a.Text(), nil
}

// next decides the reply to obs.
func (p *player) next(obs rollout.Observation) (Action, error) {
	if p.ended {
		return Action{}, fmt.Errorf("the episode goes on after a plain reply, which should have ended it (turn %d of %d)", p.turn, len(p.turns))
	}
	if p.turn >= len(p.turns) {
		return Action{}, fmt.Errorf("the episode goes on after the script's %d turns", len(p.turns))
	}
	t := p.turns[p.turn]
	switch p.phase {
	case 0:
		switch {
		case t.Folders:
			p.phase = 2
			return Action{Tool: "list_folders"}, nil
		case t.Search != "":
			p.phase = 1
			return Action{Tool: "search_emails", Param: "query", Value: t.Search}, nil
		}
		return p.answer(t) // from the email the last turn read
	case 1:
		text, err := toolAnswer(obs)
		if err != nil {
			return Action{}, err
		}
		id, err := pickHit(text, t.Subject)
		if err != nil {
			return Action{}, err
		}
		p.phase = 2
		return Action{Tool: "read_email", Param: "id", Value: id}, nil
	default:
		text, err := toolAnswer(obs)
		if err != nil {
			return Action{}, err
		}
		p.last = text
		return p.answer(t)
	}
}

// answer ends the turn the way the shape does.
func (p *player) answer(t Turn) (Action, error) {
	m := t.Answer.FindStringSubmatch(p.last)
	if m == nil {
		return Action{}, fmt.Errorf("turn %d: %q is not in the tool's answer %q", p.turn+1, t.Answer, p.last)
	}
	answer := m[1]
	first := p.turn == 0
	p.turn, p.phase = p.turn+1, 0
	switch {
	case p.shape == Reply:
		p.ended = true
		return Action{Value: "The answer is " + answer + "."}, nil
	case p.shape == Wrong && first:
		answer = WrongAnswer
	}
	return Action{Tool: "end_turn", Param: "answer", Value: answer}, nil
}

// toolAnswer is the one tool message a one-call reply gets; an error
// answer fails the policy, which never makes a call the env refuses.
func toolAnswer(obs rollout.Observation) (string, error) {
	var answers []string
	for _, m := range obs.Messages {
		if m.Role == "tool" {
			answers = append(answers, m.Content)
		}
	}
	if len(answers) != 1 {
		return "", fmt.Errorf("one tool call got %d tool messages: %q", len(answers), answers)
	}
	if strings.HasPrefix(answers[0], "Error:") {
		return "", fmt.Errorf("the call was refused: %s", answers[0])
	}
	return answers[0], nil
}

// pickHit reads search_emails's JSON list and returns the id of the first
// hit whose subject holds subject.
func pickHit(text, subject string) (string, error) {
	var hits []struct {
		ID      string `json:"id"`
		Subject string `json:"subject"`
	}
	if err := json.NewDecoder(strings.NewReader(text)).Decode(&hits); err != nil {
		return "", fmt.Errorf("search_emails answered %q: %w", text, err)
	}
	for _, h := range hits {
		if strings.Contains(strings.ToLower(h.Subject), strings.ToLower(subject)) {
			return h.ID, nil
		}
	}
	return "", fmt.Errorf("no hit's subject holds %q: %s", subject, text)
}

// EndOfTurn ends every reply, as the text a trainer decodes from a Qwen
// model keeps its end-of-turn token.
const EndOfTurn = "<|im_end|>"

// Call writes one tool call in the qwen3_coder format, from the tool's
// name and its parameters as name, value pairs.
func Call(name string, params ...string) string {
	if len(params)%2 != 0 {
		panic("policy.Call: parameters come in name, value pairs")
	}
	var b strings.Builder
	b.WriteString("<tool_call>\n<function=" + name + ">\n")
	for i := 0; i < len(params); i += 2 {
		fmt.Fprintf(&b, "<parameter=%s>\n%s\n</parameter>\n", params[i], params[i+1])
	}
	b.WriteString("</function>\n</tool_call>" + EndOfTurn)
	return b.String()
}
