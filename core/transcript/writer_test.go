//go:build unix

package transcript

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

var day1 = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

func ended(id string, at time.Time, replyBytes int) *Record {
	return &Record{Format: Format, EpisodeID: id, TaskID: "t", Ended: at, Turns: []Turn{{Reply: strings.Repeat("r", replyBytes)}}}
}

// many is n records of day1, e0 to e<n-1>, of one size.
func many(n int) []*Record {
	out := make([]*Record, n)
	for i := range out {
		out[i] = ended(fmt.Sprintf("e%02d", i), day1, 100)
	}
	return out
}

func lineLen(t *testing.T, r *Record) int64 {
	t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return int64(len(b) + 1)
}

// listDir names the files of dir with the episode ids each holds.
func listDir(t *testing.T, dir string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	files, err := Files([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if _, err := readFileIDs(f, out); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func readFileIDs(path string, out map[string][]string) (ReadStats, error) {
	var st ReadStats
	name := filepath.Base(path)
	out[name] = []string{}
	err := readFile(path, &st, func(r *Record) error {
		out[name] = append(out[name], r.EpisodeID)
		return nil
	})
	return st, err
}

// Each record is one line of its end day's file; a file that would pass
// the size limit hands over to the day's next one; a writer opened again
// goes on in the day's last file.
func TestWriterDaysAndRotation(t *testing.T) {
	one := lineLen(t, ended("e0", day1, 100))
	for _, tc := range []struct {
		name    string
		max     int64
		records []*Record
		again   []*Record // written by a second writer on the same dir
		want    map[string][]string
	}{
		{"one file", 10 * one, []*Record{ended("e0", day1, 100), ended("e1", day1, 100)}, nil,
			map[string][]string{"2026-12-02.jsonl": {"e0", "e1"}}},
		{"days", 10 * one, []*Record{ended("e0", day1, 100), ended("e1", day1.Add(14*time.Hour), 100), ended("e2", day1.Add(15*time.Hour), 100)}, nil,
			map[string][]string{"2026-12-02.jsonl": {"e0"}, "2026-12-03.jsonl": {"e1", "e2"}}},
		{"rotation by size", 2 * one, []*Record{ended("e0", day1, 100), ended("e1", day1, 100), ended("e2", day1, 100), ended("e3", day1, 100), ended("e4", day1, 100)}, nil,
			map[string][]string{"2026-12-02.jsonl": {"e0", "e1"}, "2026-12-02.1.jsonl": {"e2", "e3"}, "2026-12-02.2.jsonl": {"e4"}}},
		{"a record over the size gets a file of its own", 2 * one, []*Record{ended("e0", day1, 100), ended("big", day1, 1000), ended("e2", day1, 100)}, nil,
			map[string][]string{"2026-12-02.jsonl": {"e0"}, "2026-12-02.1.jsonl": {"big"}, "2026-12-02.2.jsonl": {"e2"}}},
		{"a restart appends to the day's last file", 2 * one, []*Record{ended("e0", day1, 100), ended("e1", day1, 100), ended("e2", day1, 100)},
			[]*Record{ended("e3", day1, 100), ended("e4", day1, 100)},
			map[string][]string{"2026-12-02.jsonl": {"e0", "e1"}, "2026-12-02.1.jsonl": {"e2", "e3"}, "2026-12-02.2.jsonl": {"e4"}}},
		{"rotation past nine reads back in number order", one, many(12), nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "made", "by", "it")
			for _, batch := range [][]*Record{tc.records, tc.again} {
				if batch == nil {
					continue
				}
				w, err := NewWriter(WriterOptions{Dir: dir, MaxFileBytes: tc.max})
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range batch {
					w.Record(r)
				}
				if err := w.Close(); err != nil {
					t.Fatal(err)
				}
				if got := testutil.ToFloat64(w.recorded); got != float64(len(batch)) {
					t.Errorf("recorded %v, want %d", got, len(batch))
				}
			}
			if got := listDir(t, dir); tc.want == nil && len(got) != len(tc.records) {
				t.Errorf("%d files, want one per record: %v", len(got), got)
			} else if tc.want != nil && fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("files %v, want %v", got, tc.want)
			}
			var ids []string
			st, err := Read([]string{dir}, func(r *Record) error { ids = append(ids, r.EpisodeID); return nil })
			if err != nil || st.Skipped != 0 || st.Partial != 0 {
				t.Fatalf("Read: %+v %v", st, err)
			}
			var written []string
			for _, r := range append(append([]*Record(nil), tc.records...), tc.again...) {
				written = append(written, r.EpisodeID)
			}
			if fmt.Sprint(ids) != fmt.Sprint(written) { // day, then rotation order
				t.Errorf("read back %v, want %v", ids, written)
			}
			if left, _ := filepath.Glob(filepath.Join(dir, ".agentenv-probe-*")); len(left) > 0 {
				t.Errorf("probe files left: %v", left)
			}
		})
	}
}

// A full queue drops and counts; the step that handed the record in
// never waits. The day's file is a FIFO no one reads yet: the writer
// blocks opening it, as on a stalled disk.
func TestWriterDropsWhenFull(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, FileName(day1.Format(time.DateOnly), 0))
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	w, err := NewWriter(WriterOptions{Dir: dir, Queue: 2})
	if err != nil {
		t.Fatal(err)
	}
	const n = 10
	for i := 0; i < n; i++ {
		w.Record(ended(fmt.Sprintf("e%d", i), day1, 10)) // returns at once, written or dropped
	}
	// The writer holds at most one record and the queue two.
	if got := testutil.ToFloat64(w.dropped); got < n-3 {
		t.Errorf("dropped %v of %d with room for 3", got, n)
	}
	read := make(chan []byte, 1)
	go func() {
		f, err := os.Open(fifo)
		if err != nil {
			read <- nil
			return
		}
		defer f.Close()
		var b bytes.Buffer
		_, _ = b.ReadFrom(f)
		read <- b.Bytes()
	}()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	lines := bytes.Count(<-read, []byte("\n"))
	dropped, recorded := testutil.ToFloat64(w.dropped), testutil.ToFloat64(w.recorded)
	if dropped+recorded != n || float64(lines) != recorded {
		t.Errorf("dropped %v recorded %v lines %d, of %d", dropped, recorded, lines, n)
	}
	w.Record(ended("late", day1, 10)) // after Close: dropped, no panic
	if got := testutil.ToFloat64(w.dropped); got != dropped+1 {
		t.Errorf("a record after Close: dropped %v, want %v", got, dropped+1)
	}
}

// A directory that cannot be written is refused at once, naming it.
func TestWriterUnwritableDir(t *testing.T) {
	base := t.TempDir()
	file := filepath.Join(base, "a-file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	ro := filepath.Join(base, "read-only")
	if err := os.Mkdir(ro, 0o555); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, dir, want string
		needsUser       bool // root writes through the mode bits
	}{
		{"under a file", filepath.Join(file, "transcripts"), "cannot be made", false},
		{"a file", file, "cannot be made", false},
		{"read-only", ro, "is not writable", true},
		// An existing directory nothing may create files in, root included.
		{"procfs", "/proc/self", "is not writable", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.needsUser && os.Geteuid() == 0 {
				t.Skip("root writes a 0555 directory; the other cases cover the refusal")
			}
			_, err := NewWriter(WriterOptions{Dir: tc.dir})
			if err == nil || !strings.Contains(err.Error(), tc.dir) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to name %s and say %q", err, tc.dir, tc.want)
			}
		})
	}
}

// A full disk (the day's file is /dev/full: every write ENOSPC) stops the
// recording with one error line, counts every record it loses, and keeps
// taking records without blocking.
func TestWriterDiskFull(t *testing.T) {
	dir := t.TempDir()
	if err := os.Symlink("/dev/full", filepath.Join(dir, FileName(day1.Format(time.DateOnly), 0))); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	w, err := NewWriter(WriterOptions{Dir: dir, Logger: hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Info})})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		w.Record(ended(fmt.Sprintf("e%d", i), day1, 100))
	}
	err = w.Close()
	if err == nil || !strings.Contains(err.Error(), "no space left") {
		t.Errorf("Close: %v, want the write's ENOSPC", err)
	}
	if got := testutil.ToFloat64(w.failed); got != 5 {
		t.Errorf("failed %v, want 5", got)
	}
	if got := testutil.ToFloat64(w.recording); got != 0 {
		t.Errorf("recording gauge %v, want 0", got)
	}
	if n := strings.Count(logs.String(), "[ERROR]"); n != 1 {
		t.Errorf("%d error lines, want 1:\n%s", n, logs.String())
	}
}

// A write cut short by the file size limit (RLIMIT_FSIZE: EFBIG, the
// kernel's own refusal, in a child process) leaves whole lines only: the
// partial line is cut off.
func TestWriterCutsPartialLine(t *testing.T) {
	if dir := os.Getenv("TRANSCRIPT_FSIZE_DIR"); dir != "" {
		fsizeChild(t, dir)
		return
	}
	dir := t.TempDir()
	first := lineLen(t, ended("e0", day1, 100))
	cmd := exec.Command(os.Args[0], "-test.run=^TestWriterCutsPartialLine$", "-test.v")
	cmd.Env = append(os.Environ(), "TRANSCRIPT_FSIZE_DIR="+dir, "TRANSCRIPT_FSIZE="+strconv.FormatInt(first+500, 10))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "file too large") || strings.Count(string(out), "[ERROR]") != 1 {
		t.Errorf("child's output lacks one EFBIG error line:\n%s", out)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "2026-12-02.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(raw)) != first || !bytes.HasSuffix(raw, []byte("\n")) {
		t.Errorf("file holds %d bytes, want the first line's %d whole", len(raw), first)
	}
}

func fsizeChild(t *testing.T, dir string) {
	limit, _ := strconv.ParseUint(os.Getenv("TRANSCRIPT_FSIZE"), 10, 64)
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: limit, Max: limit}); err != nil {
		t.Fatal(err)
	}
	w, err := NewWriter(WriterOptions{Dir: dir, Logger: hclog.New(&hclog.LoggerOptions{Output: os.Stdout})})
	if err != nil {
		t.Fatal(err)
	}
	w.Record(ended("e0", day1, 100))
	w.Record(ended("e1", day1, 5000)) // passes the limit mid-line
	w.Record(ended("e2", day1, 100))
	err = w.Close()
	t.Logf("close: %v; recorded %v failed %v", err, testutil.ToFloat64(w.recorded), testutil.ToFloat64(w.failed))
	if testutil.ToFloat64(w.recorded) != 1 || testutil.ToFloat64(w.failed) != 2 {
		t.Fatal("want 1 recorded, 2 failed")
	}
}

// One directory takes one writer: a second server recording into it is
// refused, naming the first's pid, and may take it once the first closed.
func TestWriterDirTakesOneWriter(t *testing.T) {
	dir := t.TempDir()
	w, err := NewWriter(WriterOptions{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	_, err = NewWriter(WriterOptions{Dir: dir})
	want := fmt.Sprintf("transcript directory %s is in use by another agentenv serve (pid %d): each server needs a --record directory of its own", dir, os.Getpid())
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("a second writer: %v\nwant %q", err, want)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w2, err := NewWriter(WriterOptions{Dir: dir})
	if err != nil {
		t.Fatalf("after the first closed: %v", err)
	}
	if err := w2.Close(); err != nil {
		t.Fatal(err)
	}
	files, err := Files([]string{dir})
	if err != nil || len(files) != 0 {
		t.Errorf("the lock file is listed as transcripts: %v %v", files, err)
	}
}

// A record is written a turn at a time: the writer holds one turn's JSON,
// not the line's (a 629 MB line was encoded in memory whole), and the
// line it writes is the record's JSON, exactly as long as it measured.
func TestWriterStreamsARecord(t *testing.T) {
	dir := t.TempDir()
	w, err := NewWriter(WriterOptions{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	r := &Record{Format: Format, EpisodeID: "big", TaskID: "t", Ended: day1, Prompt: []Message{{Role: "user", Content: "<go>"}},
		Tools: []Tool{{Name: "f", Parameters: json.RawMessage(`{"turns":null}`)}}}
	for i := range 24 {
		r.Turns = append(r.Turns, Turn{Reply: fmt.Sprintf("%d %s", i, strings.Repeat("<r>", 1<<18)), Messages: []Message{{Role: "tool", Content: "ok"}}})
	}
	want, err := lineSize(r)
	if err != nil {
		t.Fatal(err)
	}
	w.Record(r)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if c := w.enc.buf.Cap(); c > 4<<20 {
		t.Errorf("the writer's buffer grew to %d MiB for a %d MiB record, want one turn's worth", c>>20, want>>20)
	}
	line, err := os.ReadFile(filepath.Join(dir, FileName("2026-12-02", 0)))
	if err != nil {
		t.Fatal(err)
	}
	var whole bytes.Buffer
	enc := json.NewEncoder(&whole)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(line, whole.Bytes()) || int64(len(line)) != want {
		t.Errorf("line of %d bytes, measured %d; encoded whole it is %d bytes (equal: %v)", len(line), want, whole.Len(), bytes.Equal(line, whole.Bytes()))
	}
	var back Record
	if err := json.Unmarshal(line, &back); err != nil || len(back.Turns) != 24 || back.Turns[23].Reply != r.Turns[23].Reply || string(back.Tools[0].Parameters) != `{"turns":null}` {
		t.Fatalf("the line reads back as %d turns, tools %+v: %v", len(back.Turns), back.Tools, err)
	}
}
