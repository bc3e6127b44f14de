package main

import (
	"encoding/json"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentenv/agentenv/core/runtime"
)

// sandboxesCmd runs `agentenv sandboxes ARGS` against the process
// sandbox's state dir.
func sandboxesCmd(t *testing.T, state string, args ...string) (string, error) {
	t.Helper()
	full := append([]string{"sandboxes"}, args...)
	full = append(full, "--sandbox-config", "state_dir="+state, "--sandbox-config", "mode=process")
	out, err := exec.Command(agentenv(t), full...).CombinedOutput()
	return string(out), err
}

// sandboxRow is a line of `agentenv sandboxes list --json`, as users read it.
type sandboxRow struct {
	ID          string  `json:"id"`
	Server      string  `json:"server"`
	ServerState string  `json:"server_state"`
	Episode     string  `json:"episode"`
	Task        string  `json:"task"`
	Created     string  `json:"created"`
	AgeSeconds  float64 `json:"age_s"`
	Endpoint    string  `json:"endpoint"`
}

// listSandboxes lists the sandboxes of server (containers other tests run
// on the engine meanwhile are listed too, and left out here).
func listSandboxes(t *testing.T, state, server string) []sandboxRow {
	t.Helper()
	out, err := sandboxesCmd(t, state, "list", "--json")
	if err != nil {
		t.Fatalf("sandboxes list: %v\n%s", err, out)
	}
	var rows, ours []sandboxRow
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("sandboxes list --json printed %q: %v", out, err)
	}
	for _, r := range rows {
		if r.Server == server {
			ours = append(ours, r)
		}
	}
	return ours
}

// list shows live episodes' sandboxes with their server (running), episode
// and age; after a SIGKILL the server reads dead, reap removes its
// sandboxes, and a running server's are never touched.
func TestSandboxesListAndReap(t *testing.T) {
	state := t.TempDir()
	addr := freeAddr(t)
	s := startServe(t, gridsimBundle, addr, state, nil)
	server, err := runtime.ServerID(gridsimBundle, addr)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := range 2 {
		c := dialServe(t, addr, "")
		obs := c.observation(`{"type":"reset","data":{"split":"all","index":` + strconv.Itoa(i) + `}}`)
		o, _ := obs["observation"].(map[string]any)
		id, _ := o["episode_id"].(string)
		ids = append(ids, id)
	}
	rows := listSandboxes(t, state, server)
	if len(rows) != 2 {
		t.Fatalf("%d sandboxes listed for 2 live episodes: %+v", len(rows), rows)
	}
	for _, r := range rows {
		if r.ServerState != "running" || r.Server == "" || r.Created == "" || r.AgeSeconds < 0 || r.AgeSeconds > 120 ||
			!strings.HasPrefix(r.Endpoint, "http://127.0.0.1:") || (r.Episode != ids[0] && r.Episode != ids[1]) {
			t.Errorf("row %+v", r)
		}
	}
	table, err := sandboxesCmd(t, state, "list")
	if err != nil || !strings.Contains(table, "ID  ") || !strings.Contains(table, server+" (running)") || !strings.Contains(table, ids[0]) || !strings.Contains(table, " sandboxes\n") {
		t.Errorf("sandboxes list: %v\n%s", err, table)
	}
	// A running server's sandboxes stay.
	if out, err := sandboxesCmd(t, state, "reap"); err != nil || strings.Contains(out, server) {
		t.Fatalf("reap with the server running: %v\n%s", err, out)
	}
	if n := len(listSandboxes(t, state, server)); n != 2 {
		t.Fatalf("reap took sandboxes of a running server: %d left", n)
	}
	s.signalAndWait(t, syscall.SIGKILL, 10*time.Second)
	rows = listSandboxes(t, state, server)
	if len(rows) != 2 || rows[0].ServerState != "dead" {
		t.Fatalf("after SIGKILL: %+v", rows)
	}
	out, err := sandboxesCmd(t, state, "reap")
	if err != nil || !strings.Contains(out, "reaped 2 sandboxes of server "+server) {
		t.Fatalf("reap: %v\n%s", err, out)
	}
	if rows := listSandboxes(t, state, server); len(rows) != 0 {
		t.Fatalf("left after reap: %+v", rows)
	}
	for _, p := range stateFiles(t, state) {
		if alive(p.PID) {
			t.Errorf("env process %d survived the reap", p.PID)
		}
	}
}
