package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"

	"github.com/agentenv/agentenv/core/firstparty"
	"github.com/agentenv/agentenv/core/pluginhost"
)

// logLevelEnv sets the log level of commands that log (default warn).
const logLevelEnv = "AGENTENV_LOG_LEVEL"

// pluginHostOptions are the plugin host options every command uses: the
// default search path, the built-ins of this binary (sdk/builtin's
// registry, the host's default).
func pluginHostOptions(log hclog.Logger) pluginhost.Options {
	return pluginhost.Options{Logger: log}
}

func newPluginsCmd(env Env) *cobra.Command {
	pluginsCmd := &cobra.Command{
		Use:   "plugins",
		Short: "List and inspect sandbox, tool-format and reward plugins",
		Long: `Plugins are separate programs agentenv talks to over go-plugin gRPC. A plugin
binary is named agentenv-<kind>-<name> and found, first match winning, in the
folders of $AGENTENV_PLUGIN_PATH (colon-separated), then ~/.agentenv/plugins,
then the folder holding the agentenv binary. The first-party plugins are also
built into agentenv (unless it was built with -tags no_<name>); a binary of
the same name overrides the built-in one.`,
	}
	var listJSON bool
	listCmd := &cobra.Command{
		Use:   "list",
		Short: "List every plugin found, with its version, source, sha256 and status",
		Long: `list finds every plugin, starts each one it has not seen before (by sha256)
to ask for its Info, and prints one line per plugin. STATUS is "ok", or
"failed: <why>" for a binary that cannot serve as a plugin. The table ends
with the first-party plugins this agentenv was built without, if any. It
exits 1 when any plugin failed, after listing them all.`,
		Example: "  agentenv plugins list\n  agentenv plugins list --json | jq '.[] | select(.status != \"ok\")'",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			h, err := pluginhost.New(pluginHostOptions(env.logger(cmd, hclog.Warn)))
			if err != nil {
				return err
			}
			defer h.Close()
			ctx, cancel := context.WithTimeout(cmd.Context(), 2*time.Minute)
			defer cancel()
			entries, err := h.List(ctx)
			if err != nil {
				return fmt.Errorf("list plugins: %w", err)
			}
			if listJSON {
				err = writeJSON(cmd.OutOrStdout(), entries)
			} else {
				err = writeTable(cmd.OutOrStdout(), entries, h.Omitted())
			}
			if err != nil {
				return err
			}
			// Exit 1 when any plugin failed, so scripts and CI can check an
			// install (`agentenv plugins list >/dev/null`).
			failed := 0
			for _, e := range entries {
				if !e.OK() {
					failed++
				}
			}
			if failed > 0 {
				return fmt.Errorf("%d of %d plugins failed; their STATUS says why", failed, len(entries))
			}
			return nil
		},
	}
	listCmd.Flags().BoolVar(&listJSON, "json", false, "print a JSON array of the plugins instead of a table")

	var inspectJSON bool
	inspectCmd := &cobra.Command{
		Use:   "inspect NAME",
		Short: "Show one plugin's Info and configuration schema",
		Long: `inspect starts the plugin (unless its binary is already fingerprinted) and
prints its Info: name, kind, version, protocols, source, sha256 and the JSON
Schema its configuration must satisfy. NAME is <kind>-<name> (reward-mean),
<kind>/<name>, or the bare name when only one kind has it; an alias
(qwen3coder for qwen3_coder) names the plugin too. It exits 1 if the plugin
is not found or does not work.`,
		Example: "  agentenv plugins inspect reward-mean\n  agentenv plugins inspect local --json",
		Args:    oneArg("the plugin's name", "agentenv plugins inspect reward-mean"),
		RunE: func(cmd *cobra.Command, args []string) error {
			h, err := pluginhost.New(pluginHostOptions(env.logger(cmd, hclog.Warn)))
			if err != nil {
				return err
			}
			defer h.Close()
			ctx, cancel := context.WithTimeout(cmd.Context(), time.Minute)
			defer cancel()
			e, err := h.Inspect(ctx, args[0])
			if err != nil {
				return err
			}
			if inspectJSON {
				err = writeJSON(cmd.OutOrStdout(), e)
			} else {
				err = writeInspect(cmd.OutOrStdout(), e)
			}
			if err == nil && !e.OK() {
				err = fmt.Errorf("plugin %s %s", e.ID(), e.Status)
			}
			return err
		},
	}
	inspectCmd.Flags().BoolVar(&inspectJSON, "json", false, "print the plugin as JSON")

	pluginsCmd.AddCommand(listCmd, inspectCmd)
	return pluginsCmd
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// writeTable prints plugins one per line, like `caddy list-modules`, then
// the first-party plugins the binary was built without.
func writeTable(w io.Writer, entries []pluginhost.Entry, omitted []firstparty.Plugin) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tKIND\tVERSION\tSOURCE\tSHA256\tSTATUS")
	failed := 0
	for _, e := range entries {
		if !e.OK() {
			failed++
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", e.Name, e.Kind, orDash(e.Version), e.Source, orDash(shortSHA(e.SHA256)), e.Status)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if _, err := fmt.Fprintf(w, "\n%d plugins, %d failed\n", len(entries), failed); err != nil {
		return err
	}
	for _, f := range omitted {
		if _, err := fmt.Fprintf(w, "not built in: %s (this agentenv was built with -tags %s)\n", f.ID(), f.Tag); err != nil {
			return err
		}
	}
	return nil
}

func writeInspect(w io.Writer, e pluginhost.Entry) error {
	protocols := make([]string, len(e.Info.Protocols))
	for i, p := range e.Info.Protocols {
		protocols[i] = strconv.Itoa(p)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 1, ' ', 0)
	for _, row := range [][2]string{
		{"name", e.Name}, {"aliases", orDash(strings.Join(e.Aliases, ", "))}, {"kind", string(e.Kind)}, {"version", orDash(e.Version)},
		{"protocols", orDash(strings.Join(protocols, ", "))}, {"source", e.Source},
		{"command", strings.Join(e.Command, " ")}, {"sha256", orDash(e.SHA256)}, {"status", e.Status},
	} {
		fmt.Fprintf(tw, "%s:\t%s\n", row[0], row[1])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if !e.OK() {
		return nil
	}
	if len(bytes.TrimSpace(e.Info.ConfigSchema)) == 0 {
		_, err := fmt.Fprintln(w, "config schema: none (the plugin takes no configuration)")
		return err
	}
	var pretty bytes.Buffer
	if json.Indent(&pretty, e.Info.ConfigSchema, "", "  ") != nil {
		pretty.Reset()
		pretty.Write(e.Info.ConfigSchema)
	}
	_, err := fmt.Fprintf(w, "config schema:\n%s\n", pretty.String())
	return err
}

func shortSHA(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
