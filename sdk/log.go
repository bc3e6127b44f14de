package sdk

import (
	"os"
	"sync"

	"github.com/hashicorp/go-hclog"
)

// EnvLogLevel is the variable the host sets in every plugin's environment
// to its own log level (trace, debug, info, warn, error), so a plugin
// sends only lines the host will show.
const EnvLogLevel = "AGENTENV_LOG_LEVEL"

// stderr is the process's standard error as it was at start. go-plugin's
// Serve later points os.Stderr at a stream the host does not read, so
// anything that must reach the host's log keeps this file.
var stderr = os.Stderr

var logger = sync.OnceValue(func() hclog.Logger {
	level := hclog.LevelFromString(os.Getenv(EnvLogLevel))
	if level == hclog.NoLevel {
		level = hclog.Info
	}
	return hclog.New(&hclog.LoggerOptions{Output: stderr, JSONFormat: true, Level: level})
})

// Logger is the plugin's logger. Its lines (JSON on stderr) show in the
// host's log at their own level, under the plugin's name, e.g.
//
//	[INFO]  agentenv.plugins.sandbox-bwrap: deployed: id=bwrap-1f2e env=gridsim
//
// A logger made from it with Named("x") shows as agentenv.plugins.sandbox-bwrap.x.
// Serve also makes it hclog's default logger (hclog.L()) and routes the
// standard log package through it at info level (or the level a line
// starts with: "[WARN] disk almost full"), so every way a plugin logs ends
// up in the same place. Its level is the host's (EnvLogLevel; info when
// unset, as when a test runs the plugin in-process).
func Logger() hclog.Logger { return logger() }
