// Package importrules holds only a test: the import rules that keep the
// layers apart now that most folders share one module (sdk imports nothing
// of ours, plugins import only the SDK, core and the CLI package no plugin,
// client nothing).
package importrules
