package main

// The first-party plugins built into agentenv are linked by the
// builtins_<name>.go files beside this one: each holds one blank import
// of a plugin package, whose init registers it with sdk/builtin, behind
// a `//go:build !no_<name>` line, so
//
//	go build -tags no_hermes ./cmd/agentenv
//
// leaves hermes out (several: -tags no_hermes,no_local). Everything that
// lists or serves built-ins (`plugins list`, `plugins inspect`,
// `plugin-serve`, the plugin host) reads sdk/builtin's registry; a plugin
// left out is still named in "not built into this binary" errors, from
// core/firstparty's list. Adding a first-party plugin (docs/plugins.md):
// a builtin.Register call in its package, a line in core/firstparty's
// list, and one file here, e.g. builtins_ecs.go:
//
//	//go:build !no_ecs
//
//	package main
//
//	import _ "github.com/agentenv/agentenv/plugins/sandbox-ecs"
//
// (Mind Go's file-name constraints: builtins_linux.go or builtins_arm.go
// would only build on that OS or architecture.)
