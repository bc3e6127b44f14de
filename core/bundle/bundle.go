// Package bundle loads and validates a bundle: a folder of envs, tasks and
// evals (see docs/bundles.md). Load is strict: a bundle with any problem is
// refused whole, with every problem named by file and line.
package bundle

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// Step types.
const (
	StepDeployEnv     = "deploy_env"
	StepCallTool      = "call_tool"
	StepPromptAgent   = "prompt_agent"
	StepVerifyTool    = "verify_tool"
	StepVerifyAnswer  = "verify_answer"
	StepVerifyCommand = "verify_command"
	// StepVerifyTests is a Harbor task's verifier (harbor.go): its tests
	// folder is copied into the env, its script run there, and the reward
	// files it writes are the scores. Only Harbor datasets make it.
	StepVerifyTests = "verify_tests"
)

// EndTurnTool is the tool added to every turn of a multi-turn task: its
// "answer" argument is the turn's answer, its result the next prompt.
const EndTurnTool = "end_turn"

// DefaultPort is the port an env listens on when env.toml names none.
const DefaultPort = 18765

// SplitAll is the split holding every task of a bundle.
const SplitAll = "all"

// Options tune Load.
type Options struct {
	// MaxErrors caps how many problems a failed Load lists (0 = 20); the
	// rest are counted.
	MaxErrors int
	// MaxFileBytes caps one file of the bundle (0 = DefaultMaxFileBytes,
	// 256 MiB).
	MaxFileBytes int64
}

// Bundle is a loaded, validated bundle. It is read-only after Load and safe
// for concurrent use.
type Bundle struct {
	Dir         string // as given to Load
	Name        string // the folder's name
	Description string // first line of real text of README.md ("" without one)
	Envs        map[string]*Env
	Tasks       []*Task  // every task, in the order of split "all"
	Splits      []*Split // "all" first, then one per eval file, by name
	// Harbor: the bundle is a Harbor dataset (harbor.go), read as it is.
	Harbor bool
	// Warnings are harmless oddities (no README.md, an env no task uses).
	Warnings []string

	splits   map[string]*Split
	tasks    map[string]*Task
	toolsets []Toolset
	tsIndex  map[string]int
}

// Env is envs/<name>/env.toml.
type Env struct {
	Name     string
	Dir      string // the env's folder, absolute; Command and Build run here
	File     string // path of env.toml
	Image    string
	Command  []string
	Build    []string
	Port     int
	EnvVars  map[string]string
	CPU      float64
	MemoryMB int
	// Reuse is how many episodes one deploy of the env may serve (env.toml
	// `reuse`); 0 or 1: one, a fresh deploy per episode (the default).
	Reuse int
	// ResetTool is the tool the engine calls between two episodes on one
	// deploy (env.toml `reset_tool`, default DefaultResetTool), never
	// offered to the model; set only when Reuse > 1.
	ResetTool string

	// Terminal: the env is a Harbor task's own container with agentenv's
	// terminal server injected at deploy (docs/harbor.md); Command is empty.
	Terminal bool
	// Workdir is where the terminal runs commands ("" = the image's).
	Workdir string
	// StorageMB caps the env's disk where the sandbox can (0 = its default).
	StorageMB int
	// NoInternet: the env may reach nothing outside its sandbox.
	NoInternet bool
	// BuildTimeout bounds building the image (0 = the sandbox's default).
	BuildTimeout time.Duration
}

// DefaultResetTool is the reset tool of an env that declares reuse and
// names none.
const DefaultResetTool = "agentenv_reset"

// ResetToolVar is set in the environment of an env deployed for reuse to
// the name of its reset tool: an env serves that tool only when told, so
// the model of a bundle that does not reuse it is never offered it.
const ResetToolVar = "AGENTENV_RESET_TOOL"

// Task is one task: a task file, or one line of its seeds file.
type Task struct {
	ID     string
	Family string // the task file's name (tasks/<family>.json)
	File   string // the task file
	Line   int    // 1 for a plain task; the seeds line for a seeded one
	// SeedsFile is the seeds file a seeded task comes from ("" otherwise).
	SeedsFile string
	Steps     []Step
	Toolset   string         // id of the task's toolset
	Seed      map[string]any // the seed line (numbers as json.Number); nil if not seeded
	// Harbor is set for a task of a Harbor dataset (harbor.go).
	Harbor *HarborTask
}

// Step is one step of a task. Steps of seeded tasks share unchanged parts
// (slices, Arguments) with their template: never modify them.
type Step struct {
	ID   string
	Type string
	// Env: the env a step acts on. deploy_env: the env deployed.
	// call_tool, verify_tool, verify_command: resolved at load to the only
	// deployed env when the step names none.
	Env       string
	Tool      string          // call_tool, verify_tool
	Arguments json.RawMessage // call_tool, verify_tool: a JSON object ({} when not given)
	// prompt_agent
	SystemPrompt string
	Prompt       string
	Tools        []string // nil = default (the env's tools minus hidden ones)
	MaxTurns     int      // 0 = no cap from the task
	// Timeout ends the turn (and the episode's model turns) once it has
	// been open this long (0 = none): a Harbor task's [agent] timeout_sec.
	Timeout time.Duration
	// verify_answer
	Turn     string // id of the prompt_agent step whose answer is checked
	Pattern  string
	Expected string
	Regexp   *regexp.Regexp // compiled Pattern (shared; regexps are safe for concurrent use)
	// verify_command
	Command []string
	// verify_tests: TestsDir (absolute, on the server) is copied into the
	// env at TestsPath, Script run there with VerifierEnv within Timeout.
	TestsDir    string
	TestsPath   string
	Script      string
	VerifierEnv map[string]string
	Line        int // line of the step in the task file
}

// IsVerifier reports whether the step records a score.
func (s *Step) IsVerifier() bool {
	switch s.Type {
	case StepVerifyTool, StepVerifyAnswer, StepVerifyCommand, StepVerifyTests:
		return true
	}
	return false
}

// Split is a named, ordered list of tasks.
type Split struct {
	Name  string
	File  string // the eval file ("" for "all")
	Tasks []*Task
}

// Toolset is the set of tools a task's turns offer. Tasks sharing the same
// envs, turn tool lists, hidden tools and end_turn share one toolset; its ID
// is computed from those alone, so it is stable across loads.
type Toolset struct {
	ID   string
	Envs []string // envs deployed, in step order
	// Turns: per prompt_agent step, its explicit tools, or nil = default
	// (every deployed env's tools minus Hidden).
	Turns [][]string
	// Hidden: tools call_tool and verify_tool steps use, as "env/tool", sorted.
	Hidden  []string
	EndTurn bool // end_turn is added (more than one prompt_agent step)
	Task    *Task
	Count   int // tasks with this toolset
}

// Split returns the split of that name.
func (b *Bundle) Split(name string) (*Split, error) {
	s, ok := b.splits[name]
	if !ok {
		return nil, fmt.Errorf("bundle %s: no split %q (splits: %s)", b.Name, name, strings.Join(b.splitNames(), ", "))
	}
	return s, nil
}

// TaskAt returns the task at index (from 0) of a split.
func (b *Bundle) TaskAt(split string, index int) (*Task, error) {
	s, err := b.Split(split)
	if err != nil {
		return nil, err
	}
	if index < 0 || index >= len(s.Tasks) {
		return nil, fmt.Errorf("bundle %s: index %d out of range for split %q (%d tasks)", b.Name, index, split, len(s.Tasks))
	}
	return s.Tasks[index], nil
}

// Task returns the task with that id.
func (b *Bundle) Task(id string) (*Task, error) {
	t, ok := b.tasks[id]
	if !ok {
		return nil, fmt.Errorf("bundle %s: no task %q", b.Name, id)
	}
	return t, nil
}

// Toolsets returns the bundle's toolsets in order of first use in split
// "all". Each carries a representative task to deploy when listing tools.
func (b *Bundle) Toolsets() []Toolset { return b.toolsets }

// Toolset returns the toolset with that id.
func (b *Bundle) Toolset(id string) (*Toolset, error) {
	i, ok := b.tsIndex[id]
	if !ok {
		return nil, fmt.Errorf("bundle %s: no toolset %q", b.Name, id)
	}
	return &b.toolsets[i], nil
}

func (b *Bundle) splitNames() []string {
	names := make([]string, len(b.Splits))
	for i, s := range b.Splits {
		names[i] = s.Name
	}
	return names
}

// Verifiers returns the task's verifier steps in order.
func (t *Task) Verifiers() []*Step {
	var out []*Step
	for i := range t.Steps {
		if t.Steps[i].IsVerifier() {
			out = append(out, &t.Steps[i])
		}
	}
	return out
}

// Step returns the task's step with that id, or nil.
func (t *Task) Step(id string) *Step {
	for i := range t.Steps {
		if t.Steps[i].ID == id {
			return &t.Steps[i]
		}
	}
	return nil
}

// FirstEnv is the env of the task's first deploy_env step ("" if none):
// the env a task's metrics are labelled with.
func (t *Task) FirstEnv() string {
	for i := range t.Steps {
		if t.Steps[i].Type == StepDeployEnv {
			return t.Steps[i].Env
		}
	}
	return ""
}

// MultiTurn reports whether the task has more than one prompt_agent step
// (and so offers end_turn).
func (t *Task) MultiTurn() bool {
	n := 0
	for i := range t.Steps {
		if t.Steps[i].Type == StepPromptAgent {
			n++
		}
	}
	return n > 1
}
