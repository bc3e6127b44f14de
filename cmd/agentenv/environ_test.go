package main

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The token is gone from the server's /proc/<pid>/environ (and so from
// what `ps e` shows), not only from what its children inherit: env
// processes and plugins never see it either.
func TestServeTokenNotInProcEnviron(t *testing.T) {
	if _, err := os.Stat("/proc/self/environ"); err != nil {
		t.Skip("no /proc")
	}
	state := t.TempDir()
	addr := freeAddr(t)
	s := startServe(t, gridsimBundle, addr, state, []string{"E2E_TOKEN=" + e2eToken}, "--token-var", "E2E_TOKEN")
	c := dialServe(t, addr, e2eToken)
	c.observation(`{"type":"reset","data":{"split":"eval","index":0}}`)
	pids := []int{s.cmd.Process.Pid}
	for _, p := range stateFiles(t, state) {
		pids = append(pids, p.PID)
	}
	// The plugin processes are the server's children.
	pids = append(pids, childrenOf(s.cmd.Process.Pid)...)
	if len(pids) < 3 {
		t.Fatalf("found only processes %v: want the server, an env and plugins", pids)
	}
	for _, pid := range pids {
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err != nil {
			t.Fatalf("read /proc/%d/environ: %v", pid, err)
		}
		if bytes.Contains(env, []byte(e2eToken)) {
			t.Errorf("process %d has the token in /proc/%d/environ", pid, pid)
		}
	}
	// The server still checks the token it read.
	for token, want := range map[string]int{"wrong": 401, e2eToken: 200} {
		req, _ := http.NewRequest("GET", "http://"+addr+"/metadata", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("/metadata with token %q: %d, want %d", token, resp.StatusCode, want)
		}
	}
	if code := s.signalAndWait(t, syscall.SIGTERM, 10*time.Second); code != 0 {
		t.Fatalf("exit %d:\n%s", code, s.log)
	}
}

// childrenOf lists the processes whose parent is pid, from /proc/*/stat.
func childrenOf(pid int) []int {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var out []int
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		// After the command name: state, then the parent's pid.
		i := bytes.LastIndexByte(b, ')')
		f := strings.Fields(string(b[i+1:]))
		if i < 0 || len(f) < 2 || f[1] != strconv.Itoa(pid) {
			continue
		}
		if child, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil {
			out = append(out, child)
		}
	}
	return out
}
