package bundle

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/agentenv/agentenv/core/spelling"
)

// unsupportedKinds are folders of the Python framework's bundles that
// agentenv does not read; refusing them beats silently ignoring them.
var unsupportedKinds = map[string]bool{"agents": true, "artifacts": true, "skills": true}

// NameOf is the name the bundle in dir has (Bundle.Name): its folder's.
func NameOf(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("bundle %s: %w", dir, err)
	}
	return filepath.Base(abs), nil
}

// missingBundle says that dir does not exist, with the folder beside it
// the user probably meant, or the folders there are; it wraps
// fs.ErrNotExist.
func missingBundle(dir string) error {
	parent := filepath.Dir(filepath.Clean(dir))
	entries, err := os.ReadDir(parent)
	if err != nil {
		return notExist(fmt.Sprintf("bundle %s: no such folder, nor %s", dir, parent))
	}
	var folders []string
	for _, e := range entries {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			folders = append(folders, e.Name())
		}
	}
	if near := spelling.Nearest(filepath.Base(dir), folders); near != "" {
		return notExist(fmt.Sprintf("bundle %s: no such folder; did you mean %s?", dir, filepath.Join(parent, near)))
	}
	if len(folders) > 0 && len(folders) <= 12 {
		return notExist(fmt.Sprintf("bundle %s: no such folder (the folders in %s: %s)", dir, parent, strings.Join(folders, ", ")))
	}
	return notExist(fmt.Sprintf("bundle %s: no such folder", dir))
}

// notExist is an error that says msg and is fs.ErrNotExist.
type notExist string

func (e notExist) Error() string { return string(e) }
func (e notExist) Unwrap() error { return fs.ErrNotExist }

// Load reads and validates the bundle in dir. On any problem it returns a
// *LoadError listing them (file, line, what is wrong) and no bundle.
func Load(dir string, opts Options) (*Bundle, error) {
	max := opts.MaxErrors
	if max <= 0 {
		max = 20
	}
	info, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, missingBundle(dir)
	}
	if err != nil {
		return nil, fmt.Errorf("bundle %s: %w", dir, err)
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("bundle %s: not a folder", dir)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("bundle %s: %w", dir, err)
	}
	name, err := NameOf(abs)
	if err != nil {
		return nil, err
	}
	maxFile := opts.MaxFileBytes
	if maxFile <= 0 {
		maxFile = DefaultMaxFileBytes
	}
	ps := &problems{max: max, maxFileBytes: maxFile}
	b := &Bundle{Dir: dir, Name: name}

	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("bundle %s: %w", dir, err)
	}
	for _, e := range entries {
		switch name := e.Name(); {
		case name == "bundle.toml":
			ps.add(filepath.Join(dir, name), 0, "bundle.toml is reserved and not read: a bundle takes its name from its folder and its description from README.md; remove it")
		case e.IsDir() && unsupportedKinds[name]:
			ps.add(filepath.Join(dir, name), 0, "%s/ is not supported: a bundle holds envs/, tasks/ and evals/", name)
		}
	}
	harbor := IsHarbor(dir)
	b.Description, err = readDescription(filepath.Join(dir, "README.md"), maxFile)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if !harbor {
			b.Warnings = append(b.Warnings, "no README.md: the bundle has no description")
		}
	case err != nil:
		ps.add(filepath.Join(dir, "README.md"), 0, "cannot read: %v", err)
	}
	if harbor {
		b.Harbor = true
		loadHarbor(b, dir, abs, ps)
		if err := ps.err(dir); err != nil {
			return nil, err
		}
		b.index()
		return b, nil
	}

	b.Envs = loadEnvs(dir, ps)
	// Problems name files as the user wrote the path; an env's folder is
	// absolute because sandboxes run it from elsewhere.
	for _, env := range b.Envs {
		env.Dir = filepath.Join(abs, "envs", env.Name)
	}
	cat := &catalog{seeded: map[string]bool{}}
	b.Tasks = loadTasks(dir, b.Envs, cat, ps)
	evals := loadEvals(dir, cat, ps)
	if err := ps.err(dir); err != nil {
		return nil, err
	}
	b.Warnings = append(b.Warnings, outsideLinks(dir)...)

	b.tasks = make(map[string]*Task, len(b.Tasks))
	for _, t := range b.Tasks {
		b.tasks[t.ID] = t
	}
	b.Splits = []*Split{{Name: SplitAll, Tasks: b.Tasks}}
	for _, e := range evals {
		s := &Split{Name: e.name, File: e.file, Tasks: make([]*Task, len(e.ids))}
		for i, id := range e.ids {
			s.Tasks[i] = b.tasks[id]
		}
		b.Splits = append(b.Splits, s)
	}
	b.index()
	used := map[string]bool{}
	for _, ts := range b.toolsets {
		for _, e := range ts.Envs {
			used[e] = true
		}
	}
	for _, name := range sortedKeys(b.Envs) {
		if !used[name] {
			b.Warnings = append(b.Warnings, fmt.Sprintf("env %s: no task deploys it", name))
		}
	}
	return b, nil
}

// index fills the lookups by id and name and assigns toolsets, once
// Tasks and Splits are final.
func (b *Bundle) index() {
	b.tasks = make(map[string]*Task, len(b.Tasks))
	for _, t := range b.Tasks {
		b.tasks[t.ID] = t
	}
	b.splits = make(map[string]*Split, len(b.Splits))
	for _, s := range b.Splits {
		b.splits[s.Name] = s
	}
	b.assignToolsets()
}

// loadTasks reads tasks/: task files in name order, each followed by its
// seeded tasks in line order.
func loadTasks(dir string, envs map[string]*Env, cat *catalog, ps *problems) []*Task {
	root := filepath.Join(dir, "tasks")
	entries, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		ps.add(root, 0, "missing: a bundle needs at least one task (tasks/<name>.json)")
		return nil
	}
	if err != nil {
		ps.add(root, 0, "cannot read: %v", err)
		return nil
	}
	families := map[string]bool{}
	seeds := map[string]bool{}
	for _, e := range entries {
		name := e.Name()
		path := filepath.Join(root, name)
		switch {
		case strings.HasPrefix(name, "."):
		case isDirFollowing(e, path):
			ps.add(path, 0, "task folders are not supported: a task is tasks/<name>.json")
		case strings.HasSuffix(name, ".seeds.jsonl"):
			seeds[strings.TrimSuffix(name, ".seeds.jsonl")] = true
		case strings.HasSuffix(name, ".json"):
			family := strings.TrimSuffix(name, ".json")
			if !validName(family) {
				ps.add(path, 0, "task name %q: use letters, digits, '.', '_' and '-', starting with a letter or digit", family)
				continue
			}
			families[family] = true
		default:
			ps.add(path, 0, "not a task file: tasks/ holds <name>.json and <name>.seeds.jsonl")
		}
	}
	for name := range seeds {
		if !families[name] {
			ps.add(filepath.Join(root, name+".seeds.jsonl"), 0, "no task file %s.json for these seeds", name)
		}
	}
	if len(families) == 0 && ps.count() == 0 {
		ps.add(root, 0, "no task files: a bundle needs at least one task (tasks/<name>.json)")
	}
	var tasks []*Task
	for _, name := range sortedKeys(families) {
		seedsFile := ""
		if seeds[name] {
			seedsFile = filepath.Join(root, name+".seeds.jsonl")
		}
		tasks = append(tasks, loadFamily(name, filepath.Join(root, name+".json"), seedsFile, envs, cat, ps)...)
	}
	return tasks
}

// loadFamily loads one task file and, with a seeds file, its seeded tasks.
func loadFamily(name, file, seedsFile string, envs map[string]*Env, cat *catalog, ps *problems) []*Task {
	if seedsFile == "" {
		cat.ids = append(cat.ids, name)
	}
	data, err := readBundleFile(file, ps.maxFileBytes)
	if err != nil {
		ps.add(file, 0, "cannot read: %v", err)
		return nil
	}
	root, err := parseJSON(data)
	var je *jsonError
	if errors.As(err, &je) {
		ps.add(file, je.line, "%s", je.msg)
	} else if err != nil {
		ps.add(file, 0, "%v", err)
	}
	var lines []seedLine
	var keys map[string]bool
	if seedsFile != "" {
		sdata, err := readBundleFile(seedsFile, ps.maxFileBytes)
		if err != nil {
			ps.add(seedsFile, 0, "cannot read: %v", err)
			return nil
		}
		lines, keys = parseSeeds(seedsFile, sdata, ps)
		cat.seeded[name] = true
		for i := range lines {
			if lines[i].id != "" && !lines[i].dup {
				cat.ids = append(cat.ids, name+"/"+lines[i].id)
			}
		}
	}
	if root == nil {
		return nil
	}
	t, ok := compileTask(name, file, root, keys, ps)
	if t == nil {
		return nil
	}
	checkSeedKeys(t, seedsFile, lines, ps)
	t.base = make([]Step, len(t.steps))
	for i := range t.steps {
		t.base[i] = t.steps[i].base()
	}
	c := &checker{envs: envs, tmpl: t.steps}
	c.check(t.base, func(i int, msg string) {
		ok = false
		line := root.line
		if i >= 0 {
			line = t.base[i].Line
		}
		ps.add(file, line, "%s", msg)
	})
	if !ok {
		return nil
	}
	if seedsFile == "" {
		return []*Task{{ID: name, Family: name, File: file, Line: 1, Steps: t.base, Toolset: toolsetKey(t.base)}}
	}
	if lines == nil {
		return nil
	}
	return instantiate(t, seedsFile, lines, envs, ps)
}

// catalog lists every task id the bundle defines, loaded or not, so eval
// files are checked against what the author wrote even when a task failed.
type catalog struct {
	ids    []string        // in split "all" order
	seeded map[string]bool // task files with seeds
	index  map[string]bool // ids, built when an eval needs it
}

func (c *catalog) has(id string) bool {
	if c.index == nil {
		c.index = make(map[string]bool, len(c.ids))
		for _, id := range c.ids {
			c.index[id] = true
		}
	}
	return c.index[id]
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
