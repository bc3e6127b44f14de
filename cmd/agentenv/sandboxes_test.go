package main

import (
	"encoding/json"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
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

func listSandboxes(t *testing.T, state string) []sandboxRow {
	t.Helper()
	out, err := sandboxesCmd(t, state, "list", "--json")
	if err != nil {
		t.Fatalf("sandboxes list: %v\n%s", err, out)
	}
	var rows []sandboxRow
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("sandboxes list --json printed %q: %v", out, err)
	}
	return rows
}

// list shows live episodes' sandboxes with their server (running), episode
// and age; after a SIGKILL the server reads dead, reap removes its
// sandboxes, and a running server's are never touched.
func TestSandboxesListAndReap(t *testing.T) {
	state := t.TempDir()
	addr := freeAddr(t)
	s := startServe(t, gridsimBundle, addr, state, nil)
	var ids []string
	for i := range 2 {
		c := dialServe(t, addr, "")
		obs := c.observation(`{"type":"reset","data":{"split":"all","index":` + strconv.Itoa(i) + `}}`)
		o, _ := obs["observation"].(map[string]any)
		id, _ := o["episode_id"].(string)
		ids = append(ids, id)
	}
	rows := listSandboxes(t, state)
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
	if err != nil || !strings.Contains(table, "ID  ") || !strings.Contains(table, "(running)") || !strings.Contains(table, ids[0]) || !strings.Contains(table, "2 sandboxes") {
		t.Errorf("sandboxes list: %v\n%s", err, table)
	}
	// A running server's sandboxes stay.
	if out, err := sandboxesCmd(t, state, "reap"); err != nil || !strings.Contains(out, "0 sandboxes reaped") {
		t.Fatalf("reap with the server running: %v\n%s", err, out)
	}
	if n := len(listSandboxes(t, state)); n != 2 {
		t.Fatalf("reap took sandboxes of a running server: %d left", n)
	}
	s.signalAndWait(t, syscall.SIGKILL, 10*time.Second)
	rows = listSandboxes(t, state)
	if len(rows) != 2 || rows[0].ServerState != "dead" {
		t.Fatalf("after SIGKILL: %+v", rows)
	}
	out, err := sandboxesCmd(t, state, "reap")
	if err != nil || !strings.Contains(out, "reaped 2 sandboxes of server "+rows[0].Server) || !strings.Contains(out, "2 sandboxes reaped") {
		t.Fatalf("reap: %v\n%s", err, out)
	}
	if rows := listSandboxes(t, state); len(rows) != 0 {
		t.Fatalf("left after reap: %+v", rows)
	}
	for _, p := range stateFiles(t, state) {
		if alive(p.PID) {
			t.Errorf("env process %d survived the reap", p.PID)
		}
	}
}
