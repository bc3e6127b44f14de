package bundle

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
)

var emptyObject = json.RawMessage("{}")

// checker validates one task's steps and resolves what the loader fills in
// (a step's default env, empty arguments, compiled patterns).
//
// For a seeded family it runs twice: on the template (instance false),
// where a check runs only when every field it reads is free of
// placeholders, and then on each seeded task (instance true), where every
// check runs. Checks that passed on the template pass again, so only the
// seed-dependent ones can fail there.
type checker struct {
	envs     map[string]*Env
	tmpl     []stepTmpl
	instance bool
	rx       map[string]rxEntry // per goroutine
}

type rxEntry struct {
	re  *regexp.Regexp
	err error
}

// dyn reports whether a check reading these fields of step i must wait:
// they hold placeholders (template pass), or failed to decode.
func (c *checker) dyn(i int, bits uint32) bool {
	return !c.instance && (c.tmpl[i].dyn|c.tmpl[i].broken)&bits != 0
}

func (c *checker) anyDyn(bits uint32) bool {
	if c.instance {
		return false
	}
	for i := range c.tmpl {
		if (c.tmpl[i].dyn|c.tmpl[i].broken)&bits != 0 {
			return true
		}
	}
	return false
}

func (c *checker) compile(pattern string) (*regexp.Regexp, error) {
	if e, ok := c.rx[pattern]; ok {
		return e.re, e.err
	}
	re, err := regexp.Compile(pattern)
	if c.rx != nil {
		c.rx[pattern] = rxEntry{re, err}
	}
	return re, err
}

// check validates steps in place; report gets the step index (-1 for the
// task as a whole) and the problem.
func (c *checker) check(steps []Step, report func(i int, msg string)) {
	label := func(i int) string {
		if steps[i].ID != "" && !c.dyn(i, fID) {
			return fmt.Sprintf("step %q", steps[i].ID)
		}
		return fmt.Sprintf("step #%d", i+1)
	}
	say := func(i int, format string, args ...any) {
		report(i, label(i)+": "+fmt.Sprintf(format, args...))
	}
	idsDyn := c.anyDyn(fID)

	for i := range steps {
		switch {
		case c.tmpl[i].present&fID == 0:
			say(i, "has no \"id\"")
		case !c.dyn(i, fID) && !validName(steps[i].ID):
			say(i, "id %q: use letters, digits, '.', '_' and '-', starting with a letter or digit", steps[i].ID)
		}
	}
	if !idsDyn {
		c.checkDuplicateIDs(steps, say)
	}

	var deployed []string
	deployDyn := false
	prompts, verifiers := 0, 0
	untyped := false // a step of unknown type: what it would have done is unknown
	for i := range steps {
		s, t := &steps[i], &c.tmpl[i]
		// Checks of what earlier steps set up would only repeat that problem.
		deployDyn = deployDyn || untyped
		switch s.Type {
		case "":
			untyped = true
		case StepDeployEnv:
			switch {
			case t.present&fEnv == 0:
				say(i, "has no \"env\" (the env to deploy; envs: %s)", c.envList())
			case c.dyn(i, fEnv):
			case c.envs[s.Env] == nil:
				say(i, "names env %q, which the bundle does not have (envs: %s)", s.Env, c.envList())
			case contains(deployed, s.Env):
				say(i, "deploys env %q a second time", s.Env)
			}
			deployed = append(deployed, s.Env)
			deployDyn = deployDyn || c.dyn(i, fEnv)
		case StepCallTool, StepVerifyTool, StepVerifyCommand:
			if s.Type == StepVerifyCommand {
				switch {
				case t.present&fCommand == 0:
					say(i, "has no \"command\" (the command to run in the sandbox, as an array)")
				case len(s.Command) == 0:
					say(i, "has an empty \"command\"")
				case !c.dyn(i, fCommand) && s.Command[0] == "":
					say(i, "\"command\" starts with an empty string")
				}
			} else {
				switch {
				case t.present&fTool == 0:
					say(i, "has no \"tool\" (the env tool to call)")
				case !c.dyn(i, fTool) && s.Tool == "":
					say(i, "has an empty \"tool\"")
				}
				if s.Arguments == nil {
					s.Arguments = emptyObject
				}
			}
			c.resolveEnv(i, s, deployed, deployDyn, say)
			if s.Type != StepCallTool {
				verifiers++
			}
		case StepPromptAgent:
			prompts++
			switch {
			case t.present&fPrompt == 0:
				say(i, "has no \"prompt\" (the user message that opens the turn)")
			case !c.dyn(i, fPrompt) && s.Prompt == "":
				say(i, "has an empty \"prompt\"")
			}
			if t.present&fTools != 0 {
				if len(deployed) == 0 && !deployDyn {
					say(i, "lists \"tools\" but no env is deployed before it")
				}
				if !c.dyn(i, fTools) {
					c.checkTools(i, s.Tools, deployed, say)
				}
			}
		case StepVerifyAnswer:
			verifiers++
			c.checkAnswer(i, steps, idsDyn, say)
		}
	}
	if untyped {
		return
	}
	if prompts == 0 {
		report(-1, "the task has no prompt_agent step: the model never gets a turn")
	}
	if verifiers == 0 {
		report(-1, "the task has no verifier step (verify_tool, verify_answer or verify_command): it could never be scored")
	}
}

func (c *checker) checkDuplicateIDs(steps []Step, say func(int, string, ...any)) {
	for i := 1; i < len(steps); i++ {
		if steps[i].ID == "" {
			continue
		}
		for j := 0; j < i; j++ {
			if steps[j].ID == steps[i].ID {
				say(i, "duplicate step id (step #%d, line %d, has it too)", j+1, steps[j].Line)
				break
			}
		}
	}
}

// resolveEnv checks the env a tool or command step acts on, defaulting to
// the only deployed env.
func (c *checker) resolveEnv(i int, s *Step, deployed []string, deployDyn bool, say func(int, string, ...any)) {
	if len(deployed) == 0 {
		if !deployDyn {
			say(i, "comes before any deploy_env step: deploy an env first")
		}
		return
	}
	if c.tmpl[i].present&fEnv != 0 {
		if c.dyn(i, fEnv) || deployDyn {
			return
		}
		if !contains(deployed, s.Env) {
			say(i, "names env %q, which no earlier deploy_env step deploys (deployed: %s)", s.Env, strings.Join(deployed, ", "))
		}
		return
	}
	if len(deployed) > 1 && !deployDyn {
		say(i, "several envs are deployed (%s): name one with \"env\"", strings.Join(deployed, ", "))
		return
	}
	if !deployDyn {
		s.Env = deployed[0]
	}
}

func (c *checker) checkTools(i int, tools, deployed []string, say func(int, string, ...any)) {
	for j, name := range tools {
		switch {
		case c.resetToolOf(deployed, name) != "":
			say(i, "\"tools\" names %q, the reset tool of env %q (its env.toml reuse), which is never offered to the model", name, c.resetToolOf(deployed, name))
		case name == "":
			say(i, "\"tools\" has an empty name")
		case name == EndTurnTool:
			say(i, "\"tools\" names %q, which is reserved: multi-turn tasks get it added", EndTurnTool)
		case contains(tools[:j], name):
			say(i, "\"tools\" names %q twice", name)
		}
	}
}

// resetToolOf names the deployed env whose reset tool name is ("" for none).
func (c *checker) resetToolOf(deployed []string, name string) string {
	for _, d := range deployed {
		if e := c.envs[d]; e != nil && e.ResetTool != "" && e.ResetTool == name {
			return d
		}
	}
	return ""
}

func (c *checker) checkAnswer(i int, steps []Step, idsDyn bool, say func(int, string, ...any)) {
	s, t := &steps[i], &c.tmpl[i]
	hasPat, hasExp := t.present&fPattern != 0, t.present&fExpected != 0
	switch {
	case hasPat && hasExp:
		say(i, "has both \"pattern\" and \"expected\": give one")
	case !hasPat && !hasExp:
		say(i, "needs \"pattern\" (a regular expression) or \"expected\" (the exact answer)")
	case hasPat && !c.dyn(i, fPattern) && s.Regexp == nil:
		re, err := c.compile(s.Pattern)
		if err != nil {
			say(i, "invalid pattern %q: %v", s.Pattern, err)
		}
		s.Regexp = re
	}
	if t.present&fTurn == 0 {
		say(i, "has no \"turn\" (the id of the prompt_agent step whose answer it checks)")
		return
	}
	if c.dyn(i, fTurn) || idsDyn {
		return
	}
	var promptIDs []string
	for j := range steps {
		if steps[j].Type == StepPromptAgent {
			promptIDs = append(promptIDs, steps[j].ID)
		}
		if steps[j].ID != s.Turn {
			continue
		}
		switch {
		case steps[j].Type == "": // already reported
		case steps[j].Type != StepPromptAgent:
			say(i, "turn %q is a %s step, not a prompt_agent step", s.Turn, steps[j].Type)
		case j > i:
			say(i, "turn %q comes after this step: a turn must be answered before it is checked", s.Turn)
		}
		return
	}
	say(i, "turn %q names no step of this task (prompt_agent steps: %s)", s.Turn, listOrNone(promptIDs))
}

func (c *checker) envList() string {
	names := make([]string, 0, len(c.envs))
	for n := range c.envs {
		names = append(names, n)
	}
	sort.Strings(names)
	return listOrNone(names)
}

func listOrNone(l []string) string {
	if len(l) == 0 {
		return "none"
	}
	return strings.Join(l, ", ")
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// validName: names of envs, task files, steps and seeds become ids, paths
// and metric keys, so they keep to a safe alphabet.
func validName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case (c == '.' || c == '_' || c == '-') && i > 0:
		default:
			return false
		}
	}
	return true
}
