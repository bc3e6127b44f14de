// Package importrules keeps the layers apart now that most folders share
// one module. Its tests hold two rules: the layers (sdk imports nothing of
// ours, plugins import only the SDK, core and the CLI package no plugin,
// client nothing; over every dependency, direct or not), and the parts
// table of docs/architecture.md, read at test time, whose "may import"
// column is each package's allow-list of direct imports. The page is the
// one copy of that list: a person changing what a package may import
// edits the page they read, and the test cannot drift from it.
package importrules
