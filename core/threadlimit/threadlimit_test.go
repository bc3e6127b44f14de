package threadlimit

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, s := range files {
		p = filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// The bounds are read as the kernel and cgroups (v1 and v2) show them, with
// the threads in use; one within its margin is what failures name.
func TestLimits(t *testing.T) {
	for _, tc := range []struct {
		name      string
		files     map[string]string
		want      string // the limits, "name max used;"
		exhausted string
	}{
		{"a machine with room, cgroup v2 unbounded", map[string]string{
			"proc/loadavg": "0.50 0.40 0.30 3/12000 999\n", "proc/sys/kernel/pid_max": "32768\n", "proc/sys/kernel/threads-max": "192739\n",
			"proc/self/cgroup": "0::/user.slice\n", "sys/fs/cgroup/user.slice/pids.max": "max\n", "sys/fs/cgroup/user.slice/pids.current": "50\n",
		}, "kernel.pid_max 32768 12000;kernel.threads-max 192739 12000;", ""},
		{"pid_max all but reached", map[string]string{
			"proc/loadavg": "9.0 9.0 9.0 40/32720 999\n", "proc/sys/kernel/pid_max": "32768\n", "proc/sys/kernel/threads-max": "192739\n",
		}, "kernel.pid_max 32768 32720;kernel.threads-max 192739 32720;", "kernel.pid_max"},
		{"a systemd unit's TasksMax (cgroup v2)", map[string]string{
			"proc/loadavg": "1 1 1 3/5000 999\n", "proc/sys/kernel/pid_max": "4194304\n",
			"proc/self/cgroup": "0::/system.slice/agentenv.service\n", "sys/fs/cgroup/system.slice/agentenv.service/pids.max": "4915\n",
			"sys/fs/cgroup/system.slice/agentenv.service/pids.current": "4900\n",
		}, "kernel.pid_max 4194304 5000;the cgroup's pids.max 4915 4900;", "the cgroup's pids.max"},
		{"a container's --pids-limit (cgroup v1)", map[string]string{
			"proc/loadavg": "1 1 1 3/300 999\n", "proc/sys/kernel/pid_max": "32768\n",
			"proc/self/cgroup": "12:pids:/docker/abc\n4:memory:/docker/abc\n", "sys/fs/cgroup/pids/docker/abc/pids.max": "1000\n",
			"sys/fs/cgroup/pids/docker/abc/pids.current": "120\n",
		}, "kernel.pid_max 32768 300;the cgroup's pids.max 1000 120;", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ls := read(writeTree(t, tc.files))
			var got strings.Builder
			for _, l := range ls {
				got.WriteString(l.Name + " " + itoa(l.Max) + " " + itoa(l.Used) + ";")
			}
			if got.String() != tc.want {
				t.Errorf("limits %q, want %q", got.String(), tc.want)
			}
			l, ok := exhausted(ls)
			if ok != (tc.exhausted != "") || l.Name != tc.exhausted {
				t.Errorf("exhausted = %q %v, want %q", l.Name, ok, tc.exhausted)
			}
			if ok && (!strings.Contains(l.Note(), "out of threads") || !strings.Contains(l.Note(), l.Raise)) {
				t.Errorf("note %q", l.Note())
			}
		})
	}
}

// The start-up warning: 3,000 envs of 21 threads (16 cores) do not fit the
// default pid_max, which is what ran 127 steps into EXECUTION_ERROR.
func TestWarning(t *testing.T) {
	ls := []Limit{{"kernel.pid_max", 32768, 400, "sysctl -w kernel.pid_max=4194304"}, {"kernel.threads-max", 192739, 400, "x"}}
	w := Warning(ls, 3000, PerEnv(16))
	if !strings.Contains(w, "3000 live envs at about 21 threads each need ~63000 more") || !strings.Contains(w, "kernel.pid_max is 32768 with 400 in use") ||
		strings.Contains(w, "threads-max") || !strings.Contains(w, "--max-concurrent-envs") {
		t.Errorf("warning %q", w)
	}
	if w := Warning(ls, 64, PerEnv(16)); w != "" {
		t.Errorf("64 envs: %q", w)
	}
}

// On this machine the kernel's bounds are read, with the threads in use.
func TestLimitsHere(t *testing.T) {
	if _, err := os.Stat("/proc/sys/kernel/pid_max"); err != nil {
		t.Skip("no /proc here")
	}
	ls := Limits()
	if len(ls) < 2 || ls[0].Name != "kernel.pid_max" || ls[0].Max < 300 || ls[0].Used <= 0 {
		t.Fatalf("limits here: %+v", ls)
	}
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }
