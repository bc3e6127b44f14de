package hostenv

import (
	"os"
	"sort"
	"strconv"

	"github.com/agentenv/agentenv/sdk/sandbox"
)

// EnvEnvDir is the variable holding the env's folder in its bundle: a host
// sandbox runs the env from a working folder of its own.
const EnvEnvDir = "AGENTENV_ENV_DIR"

// Vars are the agentenv variables a host sandbox gives its env.
type Vars struct {
	Port int    // sandbox.EnvPort: the port the env listens on
	ID   string // sandbox.EnvSandboxID
	Home string // HOME: the env's working folder, as the env sees it
	Tmp  string // TMPDIR: its private temp folder, as the env sees it
}

// Environ is an env's environment: PATH (the plugin's, or a plain default),
// the variables pass names that the plugin has, the env's own (sorted),
// then agentenv's, which come last so they win.
func Environ(pass []string, spec sandbox.Spec, v Vars) []string {
	path := os.Getenv("PATH")
	if path == "" {
		path = "/usr/local/bin:/usr/bin:/bin"
	}
	env := []string{"PATH=" + path}
	for _, name := range pass {
		if val, ok := os.LookupEnv(name); ok {
			env = append(env, name+"="+val)
		}
	}
	keys := make([]string, 0, len(spec.EnvVars))
	for k := range spec.EnvVars {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		env = append(env, k+"="+spec.EnvVars[k])
	}
	return append(env,
		sandbox.EnvPort+"="+strconv.Itoa(v.Port),
		sandbox.EnvSandboxID+"="+v.ID,
		EnvEnvDir+"="+spec.Dir,
		"HOME="+v.Home,
		"TMPDIR="+v.Tmp,
	)
}
