package bundle

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	toml "github.com/pelletier/go-toml/v2"
)

// envFile is env.toml as written; pointers tell "absent" from zero.
type envFile struct {
	Image    string            `toml:"image"`
	Command  []string          `toml:"command"`
	Build    []string          `toml:"build"`
	Port     *int64            `toml:"port"`
	Env      map[string]string `toml:"env"`
	CPU      *float64          `toml:"cpu"`
	MemoryMB *int64            `toml:"memory_mb"`
	Reuse    *int64            `toml:"reuse"`
	Reset    *string           `toml:"reset_tool"`
}

var envKeys = "image, command, build, port, env, cpu, memory_mb, reuse, reset_tool"

// envKeyWant says what each env.toml key holds, for type errors.
var envKeyWant = map[string]string{
	"image": "a string", "command": "an array of strings", "build": "an array of strings",
	"port": "a whole number", "env": "a table of strings (env = {NAME = \"value\"})",
	"cpu": "a number", "memory_mb": "a whole number",
	"reuse": "a whole number (episodes per deploy)", "reset_tool": "a string (a tool the env serves)",
}

// maxReuse bounds reuse: past it an env's leaks (memory, files) outweigh
// the deploy it saves, and a typo (10000000) is caught.
const maxReuse = 100000

var envVarName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// loadEnvs reads envs/<name>/env.toml for every env folder.
func loadEnvs(dir string, ps *problems) map[string]*Env {
	envs := map[string]*Env{}
	root := filepath.Join(dir, "envs")
	entries, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		return envs
	}
	if err != nil {
		ps.add(root, 0, "cannot read: %v", err)
		return envs
	}
	for _, e := range entries {
		name := e.Name()
		path := filepath.Join(root, name)
		if strings.HasPrefix(name, ".") {
			continue
		}
		if !isDirFollowing(e, path) {
			ps.add(path, 0, "not an env folder: an env is envs/<name>/env.toml")
			continue
		}
		if !validName(name) {
			ps.add(path, 0, "env name %q: use letters, digits, '.', '_' and '-', starting with a letter or digit", name)
			continue
		}
		// A broken env stays in the map (the load fails anyway) so tasks
		// naming it are not also reported.
		envs[name] = loadEnv(name, path, ps)
	}
	return envs
}

func loadEnv(name, dir string, ps *problems) *Env {
	file := filepath.Join(dir, "env.toml")
	data, err := readBundleFile(file, ps.maxFileBytes)
	broken := &Env{Name: name, Dir: dir, File: file}
	if errors.Is(err, os.ErrNotExist) {
		ps.add(file, 0, "missing: every env needs an env.toml saying how to run it (image and/or command)")
		return broken
	}
	if err != nil {
		ps.add(file, 0, "cannot read: %v", err)
		return broken
	}
	var f envFile
	if err := toml.NewDecoder(bytes.NewReader(data)).DisallowUnknownFields().Decode(&f); err != nil {
		reportTOML(file, err, envKeyWant, envKeys, ps)
		return broken
	}
	bad := func(key, format string, args ...any) {
		ps.add(file, keyLine(data, key), format, args...)
	}
	if f.Image == "" && len(f.Command) == 0 {
		ps.add(file, 0, "needs \"image\" (a Docker image) and/or \"command\" (a process to run, relative to the env folder)")
	}
	checkArgv := func(key string, argv []string) {
		for i, a := range argv {
			if a == "" || (i == 0 && strings.TrimSpace(a) == "") {
				bad(key, "%q has an empty element (#%d)", key, i+1)
				return
			}
			if strings.ContainsRune(a, 0) {
				bad(key, "%q element #%d holds a NUL byte, which no command line can carry", key, i+1)
				return
			}
		}
	}
	checkArgv("command", f.Command)
	checkArgv("build", f.Build)
	if f.Build != nil && len(f.Build) == 0 {
		bad("build", "\"build\" is empty: leave it out or give a command")
	}
	env := &Env{Name: name, Dir: dir, File: file, Image: f.Image, Command: f.Command, Build: f.Build,
		Port: DefaultPort, EnvVars: f.Env}
	if f.Port != nil {
		if *f.Port < 1 || *f.Port > 65535 {
			bad("port", "\"port\" %d is not a port (1-65535)", *f.Port)
		}
		env.Port = int(*f.Port)
	}
	if f.CPU != nil {
		switch c := *f.CPU; {
		case !(c > 0): // NaN too: TOML has nan
			bad("cpu", "\"cpu\" must be more than 0, got %v", c)
		case math.IsInf(c, 1):
			bad("cpu", "\"cpu\" must be a finite number, got %v", c)
		}
		env.CPU = *f.CPU
	}
	if f.MemoryMB != nil {
		if *f.MemoryMB < 1 {
			bad("memory_mb", "\"memory_mb\" must be at least 1, got %d", *f.MemoryMB)
		}
		env.MemoryMB = int(*f.MemoryMB)
	}
	if f.Reuse != nil {
		if *f.Reuse < 1 || *f.Reuse > maxReuse {
			bad("reuse", "\"reuse\" must be between 1 (a fresh env every episode) and %d, got %d", maxReuse, *f.Reuse)
		}
		env.Reuse = int(*f.Reuse)
	}
	if f.Reset != nil {
		switch {
		case env.Reuse < 2:
			bad("reset_tool", "\"reset_tool\" is set but the env is not reused: add reuse = N (N >= 2 episodes per deploy), or leave reset_tool out")
		case strings.TrimSpace(*f.Reset) == "":
			bad("reset_tool", "\"reset_tool\" is empty: name the tool the env resets itself with, or leave it out for %q", DefaultResetTool)
		}
	}
	if env.Reuse > 1 {
		env.ResetTool = DefaultResetTool
		if f.Reset != nil && *f.Reset != "" {
			env.ResetTool = *f.Reset
		}
	}
	for k := range f.Env {
		switch {
		case !envVarName.MatchString(k):
			bad("env", "env var name %q is not a valid name", k)
		case k == "AGENTENV_PORT":
			bad("env", "env var AGENTENV_PORT is set by the sandbox: the env listens where it is told")
		case k == ResetToolVar:
			bad("env", "env var %s is set by agentenv for an env with reuse = N: name the tool with reset_tool", ResetToolVar)
		case strings.ContainsRune(f.Env[k], 0):
			bad("env", "env var %s holds a NUL byte, which no environment can carry", k)
		}
	}
	return env
}

// reportTOML turns a go-toml error into problems at their lines.
func reportTOML(file string, err error, want map[string]string, keys string, ps *problems) {
	var sm *toml.StrictMissingError
	if errors.As(err, &sm) {
		for _, e := range sm.Errors {
			row, _ := e.Position()
			ps.add(file, row, "unknown key %q (keys: %s)", strings.Join(e.Key(), "."), keys)
		}
		return
	}
	var de *toml.DecodeError
	if errors.As(err, &de) {
		row, _ := de.Position()
		msg := strings.TrimPrefix(de.Error(), "toml: ")
		if k := de.Key(); len(k) > 0 && strings.HasPrefix(msg, "cannot decode") {
			got := ""
			if f := strings.Fields(msg); len(f) > 3 {
				got = ", got a TOML " + f[3]
			}
			if w, ok := want[k[0]]; ok {
				msg = fmt.Sprintf("%q must be %s%s", k[0], w, got)
			}
		} else {
			msg = "invalid TOML: " + msg
		}
		ps.add(file, row, "%s", msg)
		return
	}
	ps.add(file, 0, "invalid TOML: %v", err)
}

// keyLine finds the line where a top-level key is set, for problems found
// after decoding (go-toml keeps no positions for values).
func keyLine(data []byte, key string) int {
	for i, line := range bytes.Split(data, []byte("\n")) {
		l := bytes.TrimSpace(line)
		if bytes.HasPrefix(l, []byte(key)) {
			rest := bytes.TrimSpace(l[len(key):])
			if len(rest) > 0 && rest[0] == '=' {
				return i + 1
			}
		}
	}
	return 0
}
