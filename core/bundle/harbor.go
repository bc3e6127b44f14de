package bundle

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	toml "github.com/pelletier/go-toml/v2"
)

// A Harbor dataset (docs/harbor.md) is a folder of task folders, each with
// task.toml, instruction.md, environment/ (a Dockerfile, or task.toml's
// docker_image), tests/test.sh and optionally solution/solve.sh. Load reads
// one as it is: every task folder becomes a task of three steps (deploy the
// task's own container with agentenv's terminal injected, one model turn
// on instruction.md with the terminal's tools, then the task's tests), so
// the rest of the engine serves it as any bundle.

// Harbor's names and defaults.
const (
	HarborTaskFile = "task.toml"
	// HarborShellTool and HarborEditorTool are the terminal's tools the
	// model is offered (core/terminal).
	HarborShellTool  = "shell"
	HarborEditorTool = "editor"
	// HarborTestsPath is where a task's tests/ folder goes in its container.
	HarborTestsPath = "/tests"
	// HarborImageRepo names the images built from tasks' environment/
	// folders; the tag is the folder's content hash, so a folder built once
	// is reused across tasks, episodes and restarts.
	HarborImageRepo = "agentenv-harbor"

	harborDefaultTimeout = 600 * time.Second // Harbor's default for agent, verifier and build
	harborToolsetKey     = `{"harbor":"terminal"}`
)

// HarborSystemPrompt opens every Harbor task's turn: the task's
// instruction.md is the user's message.
const HarborSystemPrompt = "You are working in a Linux container to complete the task the user gives you. " +
	"Use the shell tool to run commands and the editor tool to read and change files. " +
	"When the task is done, reply without a tool call; your work is then checked."

// HarborTask is what a task of a Harbor dataset keeps beyond its steps.
type HarborTask struct {
	Dir         string            // the task's folder, absolute
	SolutionDir string            // solution/, absolute ("" without solve.sh)
	SolutionEnv map[string]string // [solution] env
	Metadata    map[string]any    // [metadata], as written
}

// harborFile is task.toml as agentenv reads it. Keys it does not know
// are warnings, not errors: Harbor's format grows.
type harborFile struct {
	Version       string         `toml:"version"`
	SchemaVersion string         `toml:"schema_version"`
	Source        string         `toml:"source"`
	Metadata      map[string]any `toml:"metadata"`
	Task          map[string]any `toml:"task"`
	Agent         struct {
		TimeoutSec *float64 `toml:"timeout_sec"`
		User       string   `toml:"user"`
	} `toml:"agent"`
	Verifier struct {
		TimeoutSec *float64          `toml:"timeout_sec"`
		Env        map[string]string `toml:"env"`
		User       string            `toml:"user"`
	} `toml:"verifier"`
	Environment struct {
		DockerImage     string            `toml:"docker_image"`
		BuildTimeoutSec *float64          `toml:"build_timeout_sec"`
		CPUs            *float64          `toml:"cpus"`
		MemoryMB        *int64            `toml:"memory_mb"`
		StorageMB       *int64            `toml:"storage_mb"`
		Memory          string            `toml:"memory"`
		Storage         string            `toml:"storage"`
		AllowInternet   *bool             `toml:"allow_internet"`
		Workdir         string            `toml:"workdir"`
		GPUs            *int64            `toml:"gpus"`
		Env             map[string]string `toml:"env"`
	} `toml:"environment"`
	Solution struct {
		Env map[string]string `toml:"env"`
	} `toml:"solution"`
}

var harborKeyWant = map[string]string{
	"version": "a string", "schema_version": "a string", "source": "a string",
	"metadata": "a table", "task": "a table", "agent": "a table ([agent] timeout_sec = 600.0)",
	"verifier": "a table ([verifier] timeout_sec, env)", "solution": "a table ([solution] env)",
	"environment": "a table ([environment] docker_image, build_timeout_sec, cpus, memory_mb, storage_mb, allow_internet, workdir)",
	"timeout_sec": "a number of seconds", "build_timeout_sec": "a number of seconds",
	"cpus": "a number", "memory_mb": "a whole number", "storage_mb": "a whole number", "gpus": "a whole number",
	"docker_image": "a string", "workdir": "an absolute path", "allow_internet": "true or false",
	"env": "a table of strings (env = {NAME = \"value\"})", "user": "a string",
	"memory": "a size such as \"2G\"", "storage": "a size such as \"10G\"",
}

// IsHarbor reports whether dir looks like a Harbor dataset: it is a task
// folder, or holds task folders (or folders of them), and is not an
// agentenv bundle (no tasks/ folder).
func IsHarbor(dir string) bool {
	if isDir(filepath.Join(dir, "tasks")) {
		return false
	}
	if isFile(filepath.Join(dir, HarborTaskFile)) {
		return true
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range entries {
		sub := filepath.Join(dir, e.Name())
		if strings.HasPrefix(e.Name(), ".") || !isDirFollowing(e, sub) {
			continue
		}
		if isFile(filepath.Join(sub, HarborTaskFile)) {
			return true
		}
		inner, err := os.ReadDir(sub)
		if err != nil {
			continue
		}
		for _, ie := range inner {
			if isFile(filepath.Join(sub, ie.Name(), HarborTaskFile)) {
				return true
			}
		}
	}
	return false
}

func isDir(path string) bool {
	info, err := os.Stat(path)
	return err == nil && info.IsDir()
}

func isFile(path string) bool {
	info, err := os.Stat(path)
	return err == nil && info.Mode().IsRegular()
}

// harborSplit is a split's task folders before they are read.
type harborSplit struct {
	name string
	dirs []string // task folders, absolute, by name
}

// loadHarbor fills b from the Harbor dataset in dir (abs: its absolute
// path). Splits: a folder of task folders is one split named after it
// plus "all"; a folder of such folders gives a split per subfolder.
func loadHarbor(b *Bundle, dir, abs string, ps *problems) {
	b.Envs = map[string]*Env{}
	var splits []harborSplit
	if isFile(filepath.Join(abs, HarborTaskFile)) {
		splits = []harborSplit{{name: b.Name, dirs: []string{abs}}}
	} else {
		flat := harborSplit{name: b.Name}
		entries, err := os.ReadDir(abs)
		if err != nil {
			ps.add(dir, 0, "cannot read: %v", err)
			return
		}
		for _, e := range entries {
			sub := filepath.Join(abs, e.Name())
			if strings.HasPrefix(e.Name(), ".") || !isDirFollowing(e, sub) {
				continue
			}
			if isFile(filepath.Join(sub, HarborTaskFile)) {
				flat.dirs = append(flat.dirs, sub)
				continue
			}
			inner := harborSplit{name: e.Name()}
			ies, err := os.ReadDir(sub)
			if err != nil {
				ps.add(sub, 0, "cannot read: %v", err)
				continue
			}
			for _, ie := range ies {
				p := filepath.Join(sub, ie.Name())
				if strings.HasPrefix(ie.Name(), ".") || !isDirFollowing(ie, p) {
					continue
				}
				if isFile(filepath.Join(p, HarborTaskFile)) {
					inner.dirs = append(inner.dirs, p)
				} else {
					ps.add(p, 0, "not a Harbor task: no %s (a task folder holds task.toml, instruction.md, environment/ and tests/test.sh)", HarborTaskFile)
				}
			}
			if len(inner.dirs) > 0 {
				splits = append(splits, inner)
			} else {
				ps.add(sub, 0, "not a Harbor task: no %s (a task folder holds task.toml, instruction.md, environment/ and tests/test.sh)", HarborTaskFile)
			}
		}
		switch {
		case len(flat.dirs) > 0 && len(splits) > 0:
			ps.add(dir, 0, "holds task folders (%s) and folders of task folders (%s): use one layout, a folder of tasks or a folder of splits",
				filepath.Base(flat.dirs[0]), splits[0].name)
			return
		case len(flat.dirs) > 0:
			splits = []harborSplit{flat}
		}
	}
	nested := len(splits) > 1 || (len(splits) == 1 && splits[0].name != b.Name)
	b.Splits = []*Split{{Name: SplitAll}}
	for _, sp := range splits {
		if sp.name == SplitAll {
			ps.add(filepath.Join(abs, sp.name), 0, "a split may not be named %q: that split holds every task", SplitAll)
			continue
		}
		split := &Split{Name: sp.name, File: filepath.Join(abs, sp.name)}
		if !nested {
			split.File = abs
		}
		for _, td := range sp.dirs {
			id := filepath.Base(td)
			if nested {
				id = sp.name + "/" + id
			}
			t := loadHarborTask(id, td, b.Envs, ps)
			if t == nil {
				continue
			}
			b.Tasks = append(b.Tasks, t)
			split.Tasks = append(split.Tasks, t)
		}
		b.Splits = append(b.Splits, split)
	}
	b.Splits[0].Tasks = b.Tasks
	if len(b.Tasks) == 0 && ps.count() == 0 {
		ps.add(dir, 0, "no Harbor task found: a dataset is a folder of task folders, each with %s", HarborTaskFile)
	}
}

// loadHarborTask reads one task folder; nil when it is broken (its
// problems are in ps).
func loadHarborTask(id, dir string, envs map[string]*Env, ps *problems) *Task {
	file := filepath.Join(dir, HarborTaskFile)
	n := ps.count()
	data, err := readBundleFile(file, ps.maxFileBytes)
	if err != nil {
		ps.add(file, 0, "cannot read: %v", err)
		return nil
	}
	var f harborFile
	err = toml.NewDecoder(bytes.NewReader(data)).DisallowUnknownFields().Decode(&f)
	var sm *toml.StrictMissingError
	if errors.As(err, &sm) {
		// Unknown keys are Harbor's newer or other tools' own: read on.
		f = harborFile{}
		err = toml.NewDecoder(bytes.NewReader(data)).Decode(&f)
	}
	if err != nil {
		reportTOML(file, err, harborKeyWant, "", ps)
		return nil
	}
	bad := func(key, format string, args ...any) { ps.add(file, keyLine(data, key), format, args...) }
	seconds := func(key string, v *float64) time.Duration {
		if v == nil {
			return harborDefaultTimeout
		}
		if !(*v > 0) || math.IsInf(*v, 1) || *v > 7*24*3600 {
			bad(key, "%q must be a number of seconds above 0 (at most a week), got %v", key, *v)
			return harborDefaultTimeout
		}
		return time.Duration(*v * float64(time.Second))
	}
	agentTimeout := seconds("timeout_sec", f.Agent.TimeoutSec)
	verifierTimeout := seconds("timeout_sec", f.Verifier.TimeoutSec)
	buildTimeout := seconds("build_timeout_sec", f.Environment.BuildTimeoutSec)

	instruction, err := readBundleFile(filepath.Join(dir, "instruction.md"), ps.maxFileBytes)
	switch {
	case errors.Is(err, os.ErrNotExist):
		ps.add(filepath.Join(dir, "instruction.md"), 0, "missing: a Harbor task needs instruction.md, the task given to the model")
	case err != nil:
		ps.add(filepath.Join(dir, "instruction.md"), 0, "cannot read: %v", err)
	case strings.TrimSpace(string(instruction)) == "":
		ps.add(filepath.Join(dir, "instruction.md"), 0, "empty: it is the task given to the model")
	}
	testsDir := filepath.Join(dir, "tests")
	if !isFile(filepath.Join(testsDir, "test.sh")) {
		ps.add(filepath.Join(testsDir, "test.sh"), 0, "missing: a Harbor task's verifier is tests/test.sh, which writes /logs/verifier/reward.txt or reward.json")
	} else if err := checkInside(dir, testsDir); err != nil {
		ps.add(testsDir, 0, "%v", err)
	}

	env := &Env{Name: harborEnvName(id), Dir: filepath.Join(dir, "environment"), File: file, Port: DefaultPort,
		Terminal: true, Workdir: f.Environment.Workdir, BuildTimeout: buildTimeout, EnvVars: f.Environment.Env,
		NoInternet: f.Environment.AllowInternet != nil && !*f.Environment.AllowInternet}
	if f.Environment.Workdir != "" && !strings.HasPrefix(f.Environment.Workdir, "/") {
		bad("workdir", "\"workdir\" must be an absolute path in the container, got %q", f.Environment.Workdir)
	}
	for k, v := range f.Environment.Env {
		if !envVarName.MatchString(k) || strings.ContainsRune(v, 0) || k == "AGENTENV_PORT" {
			bad("env", "[environment] env var %q is not a valid name or value", k)
		}
	}
	if c := f.Environment.CPUs; c != nil {
		if !(*c > 0) || math.IsInf(*c, 1) {
			bad("cpus", "\"cpus\" must be more than 0, got %v", *c)
		} else {
			env.CPU = *c
		}
	}
	env.MemoryMB = harborSize(file, data, "memory_mb", f.Environment.MemoryMB, "memory", f.Environment.Memory, ps)
	env.StorageMB = harborSize(file, data, "storage_mb", f.Environment.StorageMB, "storage", f.Environment.Storage, ps)
	if g := f.Environment.GPUs; g != nil && *g > 0 {
		bad("gpus", "\"gpus\" = %d: agentenv's sandboxes give envs no GPU; this task cannot run here", *g)
	}
	dockerfile := filepath.Join(env.Dir, "Dockerfile")
	switch {
	case f.Environment.DockerImage != "":
		env.Image = f.Environment.DockerImage
	case isFile(filepath.Join(env.Dir, "docker-compose.yaml")) || isFile(filepath.Join(env.Dir, "docker-compose.yml")):
		ps.add(env.Dir, 0, "multi-container tasks (docker-compose.yaml) are not supported: give the task one Dockerfile or a docker_image")
	case !fileExists(dockerfile):
		ps.add(dockerfile, 0, "missing: a Harbor task's container is built from environment/Dockerfile, or named by [environment] docker_image in task.toml")
	default:
		if err := checkInside(dir, dockerfile); err != nil {
			ps.add(dockerfile, 0, "%v", err)
			break
		}
		if err := checkInside(dir, env.Dir); err != nil {
			ps.add(env.Dir, 0, "%v", err)
			break
		}
		hash, err := contextHash(env.Dir)
		if err != nil {
			ps.add(env.Dir, 0, "%v", err)
			break
		}
		env.Image = HarborImageRepo + ":" + hash
	}
	for k, v := range f.Verifier.Env {
		if !envVarName.MatchString(k) || strings.ContainsRune(v, 0) {
			bad("env", "[verifier] env var %q is not a valid name or value", k)
		}
	}
	if ps.count() > n {
		return nil
	}
	if other, ok := envs[env.Name]; ok {
		ps.add(file, 0, "task %s's env name %q is also task folder %s's: rename one folder", id, env.Name, filepath.Dir(other.File))
		return nil
	}
	envs[env.Name] = env
	h := &HarborTask{Dir: dir, SolutionEnv: f.Solution.Env, Metadata: f.Metadata}
	if isFile(filepath.Join(dir, "solution", "solve.sh")) {
		h.SolutionDir = filepath.Join(dir, "solution")
	}
	return &Task{
		ID: id, Family: "harbor", File: file, Line: 1, Toolset: harborToolsetKey, Harbor: h,
		Steps: []Step{
			{ID: "deploy", Type: StepDeployEnv, Env: env.Name},
			{ID: "agent", Type: StepPromptAgent, SystemPrompt: HarborSystemPrompt, Prompt: string(instruction),
				Tools: []string{HarborShellTool, HarborEditorTool}, Timeout: agentTimeout},
			{ID: "tests", Type: StepVerifyTests, Env: env.Name, TestsDir: testsDir, TestsPath: HarborTestsPath,
				Script: HarborTestsPath + "/test.sh", VerifierEnv: f.Verifier.Env, Timeout: verifierTimeout},
		},
	}
}

func fileExists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// harborEnvName is a task's env name: its id with '/' as '.'.
func harborEnvName(id string) string {
	var b strings.Builder
	for i, c := range id {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
			b.WriteRune(c)
		case (c == '.' || c == '_' || c == '-') && i > 0:
			b.WriteRune(c)
		case c == '/' && i > 0:
			b.WriteByte('.')
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}

// harborSize reads a size in MB: the *_mb key, or the older "2G" string.
func harborSize(file string, data []byte, mbKey string, mb *int64, strKey, str string, ps *problems) int {
	if mb != nil {
		if *mb < 1 {
			ps.add(file, keyLine(data, mbKey), "%q must be at least 1, got %d", mbKey, *mb)
			return 0
		}
		return int(*mb)
	}
	if str == "" {
		return 0
	}
	s := strings.ToUpper(strings.TrimSuffix(strings.TrimSpace(str), "B"))
	mult := 1.0 / (1 << 20) // bytes
	switch {
	case strings.HasSuffix(s, "K"):
		mult, s = 1.0/1024, s[:len(s)-1]
	case strings.HasSuffix(s, "M"):
		mult, s = 1, s[:len(s)-1]
	case strings.HasSuffix(s, "G"):
		mult, s = 1024, s[:len(s)-1]
	case strings.HasSuffix(s, "T"):
		mult, s = 1024*1024, s[:len(s)-1]
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || !(v > 0) || math.IsInf(v, 1) {
		ps.add(file, keyLine(data, strKey), "%q must be a size such as \"2G\" or \"512M\", got %q", strKey, str)
		return 0
	}
	return max(1, int(math.Ceil(v*mult)))
}

// checkInside refuses a path that resolves outside the task folder: a
// Dockerfile or tests reached through a link to elsewhere on the server.
func checkInside(taskDir, path string) error {
	root, err := filepath.EvalSymlinks(taskDir)
	if err != nil {
		return err
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return fmt.Errorf("cannot resolve: %v", err)
	}
	if !inside(root, real) {
		return fmt.Errorf("is outside the task folder (a link to %s): a task's files must be its own", real)
	}
	return nil
}

// contextHash is the content hash of a build context: every file's path,
// mode and bytes, in name order; 16 hex digits name the image.
func contextHash(dir string) (string, error) {
	h := sha256.New()
	var paths []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		paths = append(paths, path)
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("reading the build context: %w", err)
	}
	sort.Strings(paths)
	for _, p := range paths {
		info, err := os.Lstat(p)
		if err != nil {
			return "", err
		}
		rel, _ := filepath.Rel(dir, p)
		fmt.Fprintf(h, "%s\x00%o\x00", filepath.ToSlash(rel), info.Mode())
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return "", err
			}
			fmt.Fprintf(h, "%s\x00", target)
		case info.Mode().IsRegular():
			f, err := os.Open(p)
			if err != nil {
				return "", err
			}
			_, err = io.Copy(h, f)
			f.Close()
			if err != nil {
				return "", err
			}
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}
