package cli

import (
	"errors"
	"fmt"
	"net"
	"regexp"
	"runtime"
	"strconv"
	"syscall"

	"github.com/agentenv/agentenv/core/threadlimit"
)

// listenError words a failed listen, suggesting --addr when the address
// is taken.
func listenError(addr string, err error) error {
	if !errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	host := "127.0.0.1"
	if h, _, serr := net.SplitHostPort(addr); serr == nil {
		host = h
	}
	hint := "--addr " + net.JoinHostPort(host, "0") + " (any free port; the log prints the one taken)"
	// A port free now, on the same host: the suggestion must not be taken too.
	if ln, lerr := net.Listen("tcp", net.JoinHostPort(host, "0")); lerr == nil {
		free := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		hint = "--addr " + net.JoinHostPort(host, strconv.Itoa(free)) + " (free just now), or " + hint
	}
	return fmt.Errorf("listen on %s: another process (another agentenv serve?) listens there; stop it, or choose another address, e.g. %s: %w", addr, hint, err)
}

// numberWantString finds a config error at a field given a number where
// the plugin wants a string: "at \"/grace\": got number, want string".
var numberWantString = regexp.MustCompile(`at "/([^"/]+)": got number, want string`)

// sandboxConfigHint adds to a sandbox config error the likely fix when a
// --sandbox-config value was read as a number where the plugin wants a
// string, such as grace=5 for a duration.
func sandboxConfigHint(err error, config map[string]any) error {
	m := numberWantString.FindStringSubmatch(err.Error())
	if m == nil {
		return err
	}
	v, isNumber := config[m[1]].(float64)
	if !isNumber {
		return err
	}
	n := strconv.FormatFloat(v, 'f', -1, 64)
	return fmt.Errorf("%w (--sandbox-config %s=%s was read as the number %s; for a duration write %s=%ss, for other text %s='\"%s\"')",
		err, m[1], n, n, m[1], n, m[1], n)
}

// envVarName is what an environment variable's name looks like by
// convention; a token almost never does.
var envVarName = regexp.MustCompile(`^[A-Z_][A-Z0-9_]{0,127}$`)

// tokenVarError says the --token-var variable is unset or empty. The
// value is named only when it looks like a variable's name: given the
// token itself by mistake, the error must not print it.
// minTokenLen is the shortest token serve takes without a warning: 32
// characters, what openssl rand -hex 16 prints (128 random bits). The
// page's login is throttled, but the API answers a wrong token at once
// (about 1,500 tries a second a connection), so a token must be too long
// to guess, not only hard to.
const minTokenLen = 32

// shortTokenWarning is the warning for a token shorter than minTokenLen
// ("" for one long enough); it says the length, never the token.
func shortTokenWarning(token string) string {
	if n := len(token); n < minTokenLen {
		return fmt.Sprintf("the token has %d characters: a guesser tries about 1,500 a second per connection; use %d random characters or more (openssl rand -hex 16)", n, minTokenLen)
	}
	return ""
}

func tokenVarError(name string) error {
	if envVarName.MatchString(name) {
		return fmt.Errorf("--token-var %s: the variable is empty or unset; put the token in it, or drop --token-var to serve without one", name)
	}
	return errors.New("--token-var takes the name of the environment variable that holds the token (e.g. AGENTENV_TOKEN), not the token; the value given names no set variable and is not shown here in case it is the token itself")
}

// threadWarning warns when --max-concurrent-envs envs run on this machine
// could pass a bound on its threads (kernel.pid_max, threads-max, a
// cgroup's pids.max, ulimit -u): 3,000 process envs on 16 cores passed
// the default pid_max and 127 steps failed. Envs of the ecs and k8s
// sandboxes run elsewhere.
func threadWarning(sandboxName string, maxEnvs int) string {
	if sandboxName == "ecs" || sandboxName == "k8s" {
		return ""
	}
	ls := threadlimit.Limits()
	if l, ok := threadlimit.NprocLimit(); ok {
		ls = append(ls, l)
	}
	return threadlimit.Warning(ls, maxEnvs, threadlimit.PerEnv(runtime.NumCPU()))
}
