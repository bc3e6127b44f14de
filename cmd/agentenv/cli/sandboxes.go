package cli

import (
	"context"
	"fmt"
	"io"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"

	"github.com/agentenv/agentenv/core/pluginhost"
	"github.com/agentenv/agentenv/core/runtime"
	"github.com/agentenv/agentenv/sdk/sandbox"
)

// sandboxesTimeout bounds one sandboxes command (reaping many containers
// takes a while).
const sandboxesTimeout = 10 * time.Minute

func newSandboxesCmd(env Env) *cobra.Command {
	var name string
	var cfgValues []string
	cmd := &cobra.Command{
		Use:   "sandboxes",
		Short: "List live sandboxes, and reap those of servers that are gone",
		Long: `Every sandbox agentenv deploys carries labels: its server, episode, task and
creation time. A running server holds a claim (a lock file under the user
cache folder, agentenv/servers) that the kernel drops when it dies, however
it dies. These commands ask a sandbox plugin (local by default, configured as
serve's --sandbox-config) for the live sandboxes. See docs/sandboxes.md.`,
	}
	cmd.PersistentFlags().StringVar(&name, "sandbox", runtime.DefaultSandbox, "sandbox plugin to ask")
	cmd.PersistentFlags().StringArrayVar(&cfgValues, "sandbox-config", nil, "sandbox setting as key=value, or a .json/.toml file of settings, as for serve; repeatable")

	var listJSON bool
	list := &cobra.Command{
		Use:   "list",
		Short: "List live sandboxes with their server, episode and age",
		Long: `list prints one line per live sandbox: its id, its server and whether that
server runs (running, dead, or unknown: not a server of this user's cache),
its episode and task ("warm" for a sandbox the warm pool holds), its age
and its endpoint.`,
		Example: "  agentenv sandboxes list\n  agentenv sandboxes list --sandbox-config mode=docker --json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withSandbox(cmd.Context(), env.logger(cmd, hclog.Warn), name, cfgValues, func(ctx context.Context, d sandbox.Driver) error {
				sbs, err := d.List(ctx, nil)
				if err != nil {
					return fmt.Errorf("list sandboxes: %w", err)
				}
				rows, err := sandboxRows(sbs, runtime.DefaultServersDir(), time.Now())
				if err != nil {
					return err
				}
				if listJSON {
					return writeJSON(cmd.OutOrStdout(), rows)
				}
				return writeSandboxTable(cmd.OutOrStdout(), rows)
			})
		},
	}
	list.Flags().BoolVar(&listJSON, "json", false, "print a JSON array instead of a table")

	var all bool
	reap := &cobra.Command{
		Use:   "reap",
		Short: "Tear down every sandbox whose server is no longer running",
		Long: `reap terminates the sandboxes (containers and their networks, processes)
of every server that died without tearing down: its claim is still in the
servers folder but no process holds it. Sandboxes of running servers are never
touched. Sandboxes of servers this folder does not know (another user's) and
sandboxes with no server label are left alone unless --all is given.
agentenv serve does the same at start. It exits 1 if any could not be removed.`,
		Example: "  agentenv sandboxes reap\n  agentenv sandboxes reap --all",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withSandbox(cmd.Context(), env.logger(cmd, hclog.Warn), name, cfgValues, func(ctx context.Context, d sandbox.Driver) error {
				reaped, err := runtime.ReapDead(ctx, d, runtime.DefaultServersDir(), "", all)
				ids := make([]string, 0, len(reaped))
				total := 0
				for id, n := range reaped {
					ids = append(ids, id)
					total += n
				}
				sort.Strings(ids)
				out := cmd.OutOrStdout()
				for _, id := range ids {
					fmt.Fprintf(out, "reaped %d sandboxes of server %s\n", reaped[id], orDash(id))
				}
				fmt.Fprintf(out, "%d sandboxes reaped\n", total)
				return err
			})
		},
	}
	reap.Flags().BoolVar(&all, "all", false, "also reap sandboxes of unknown servers and unlabelled ones")
	cmd.AddCommand(list, reap)
	return cmd
}

// withSandbox starts the sandbox plugin, configured as serve would, and
// runs f with it.
func withSandbox(ctx context.Context, log hclog.Logger, name string, cfgValues []string, f func(context.Context, sandbox.Driver) error) error {
	settings, err := parseSandboxConfig(cfgValues)
	if err != nil {
		return err
	}
	cfg, err := jsonConfig(settings)
	if err != nil {
		return fmt.Errorf("--sandbox-config: %w", err)
	}
	h, err := pluginhost.New(pluginHostOptions(log))
	if err != nil {
		return err
	}
	defer h.Close()
	ctx, cancel := context.WithTimeout(ctx, sandboxesTimeout)
	defer cancel()
	d, err := h.Sandbox(ctx, name, cfg)
	if err != nil {
		return fmt.Errorf("sandbox %q: %w", name, err)
	}
	return f(ctx, d)
}

// sandboxRow is one live sandbox as list shows it.
type sandboxRow struct {
	ID          string  `json:"id"`
	Server      string  `json:"server"`
	ServerState string  `json:"server_state"`
	Episode     string  `json:"episode"`
	Task        string  `json:"task"`
	Created     string  `json:"created,omitempty"`
	AgeSeconds  float64 `json:"age_s,omitempty"`
	Endpoint    string  `json:"endpoint"`
}

func sandboxRows(sbs []sandbox.Sandbox, serversDir string, now time.Time) ([]sandboxRow, error) {
	states := map[string]string{}
	rows := make([]sandboxRow, 0, len(sbs))
	for _, sb := range sbs {
		l := sb.Labels
		server := l[sandbox.LabelServer]
		st, ok := states[server]
		if !ok {
			state := runtime.ServerUnknown
			if server != "" {
				var err error
				if state, err = runtime.State(serversDir, server); err != nil {
					return nil, err
				}
			}
			st = state.String()
			states[server] = st
		}
		row := sandboxRow{ID: sb.ID, Server: server, ServerState: st, Episode: l[sandbox.LabelEpisode],
			Task: l[sandbox.LabelTask], Created: l[sandbox.LabelCreated], Endpoint: sb.Endpoint}
		if t, err := time.Parse(time.RFC3339, row.Created); err == nil {
			row.AgeSeconds = now.Sub(t).Round(time.Second).Seconds()
		}
		rows = append(rows, row)
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].Server != rows[j].Server {
			return rows[i].Server < rows[j].Server
		}
		return rows[i].Created < rows[j].Created
	})
	return rows, nil
}

func writeSandboxTable(w io.Writer, rows []sandboxRow) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSERVER\tEPISODE\tTASK\tAGE\tENDPOINT")
	for _, r := range rows {
		age := "-"
		if r.Created != "" {
			age = (time.Duration(r.AgeSeconds) * time.Second).String()
		}
		server := "-"
		if r.Server != "" {
			server = r.Server + " (" + r.ServerState + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, server, orDash(r.Episode), orDash(r.Task), age, orDash(r.Endpoint))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\n%d sandboxes\n", len(rows))
	return err
}
