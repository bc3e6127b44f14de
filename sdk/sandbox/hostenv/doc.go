// Package hostenv holds the pieces a sandbox plugin needs when it runs an
// env as processes on the host (plainly, or inside bwrap or a similar
// wrapper): loopback ports reserved across plugin processes, atomic state
// files, the env's environment, its build command, capped command output
// and label matching. The first-party local sandbox and the bwrap example
// both use it; what is particular to a plugin (how it starts, tracks and
// stops an env) stays in the plugin.
package hostenv
