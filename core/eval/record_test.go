package eval

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func reward(v float64) *float64 { return &v }

func sameEval(r *Record) error {
	if r.Model != "m" {
		return fmt.Errorf("model %s", r.Model)
	}
	return nil
}

func line(t *testing.T, r Record) string {
	t.Helper()
	r.Model = "m"
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b) + "\n"
}

func TestResultsFile(t *testing.T) {
	a := Record{TaskID: "day/a", Reward: reward(1), Messages: []Message{{"user", "u"}, {"assistant", "<tool_call>"}}}
	b := Record{TaskID: "day/b", Failure: &Failure{Cause: CauseModel, Error: "HTTP 500"}}
	c := Record{TaskID: "day/a", Sample: 1, Reward: reward(0.5)}
	for _, tc := range []struct {
		name          string
		content       string
		resume, retry bool
		wantErr       string
		wantKeys      []key
		wantFile      string // after opening; "" = unchanged
		dropped       int
	}{
		{name: "no file", resume: false, wantFile: ""},
		{name: "a file of rollouts without --resume", content: line(t, a), wantErr: "already holds 1 lines: pass --resume"},
		{name: "resume", content: line(t, a) + line(t, b) + line(t, c), resume: true,
			wantKeys: []key{{"day/a", 0}, {"day/b", 0}, {"day/a", 1}}},
		{name: "a half-written last line is cut off", content: line(t, a) + line(t, b) + `{"task_id":"day/a","sam`, resume: true,
			wantKeys: []key{{"day/a", 0}, {"day/b", 0}}, wantFile: line(t, a) + line(t, b), dropped: 1},
		{name: "a half line alone", content: `{"task_id":"day/a"`, resume: true, wantFile: "", dropped: 1},
		{name: "retry the failed", content: line(t, a) + line(t, b) + line(t, c), resume: true, retry: true,
			wantKeys: []key{{"day/a", 0}, {"day/a", 1}}, wantFile: line(t, a) + line(t, c)},
		{name: "another eval's file", content: strings.Replace(line(t, a), `"model":"m"`, `"model":"other"`, 1), resume: true,
			wantErr: "line 1: model other"},
		{name: "not a results file", content: line(t, a) + "hello\n", resume: true, wantErr: "line 2 is not a rollout of agentenv eval"},
		{name: "a rollout twice", content: line(t, a) + line(t, b) + line(t, a), resume: true, wantErr: "lines 1 and 3 are both sample 0 of task day/a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "sub", "results.jsonl")
			if tc.content != "" {
				os.MkdirAll(filepath.Dir(path), 0o755)
				if err := os.WriteFile(path, []byte(tc.content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			w, st, err := openResults(path, tc.resume, tc.retry, sameEval)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				if got, _ := os.ReadFile(path); string(got) != tc.content {
					t.Fatal("a refused file was changed")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer w.close()
			var keys []key
			for _, r := range st.records {
				keys = append(keys, r.key())
				if r.Messages != nil {
					t.Error("a resumed record keeps its messages in memory")
				}
			}
			if fmt.Sprint(keys) != fmt.Sprint(tc.wantKeys) || st.dropped != tc.dropped {
				t.Fatalf("keys %v dropped %d, want %v %d", keys, st.dropped, tc.wantKeys, tc.dropped)
			}
			want := tc.content
			if tc.wantFile != "" || tc.dropped > 0 {
				want = tc.wantFile
			}
			if got, _ := os.ReadFile(path); string(got) != want {
				t.Fatalf("file now:\n%s\nwant:\n%s", got, want)
			}
			// Appending goes after what is kept.
			d := Record{TaskID: "day/d", Model: "m", Reward: reward(0.2), Messages: []Message{{"assistant", "<tool_call>\n{}\n</tool_call>"}}}
			if err := w.append(&d); err != nil {
				t.Fatal(err)
			}
			got, _ := os.ReadFile(path)
			last := string(got[len(want):])
			if !strings.HasSuffix(last, "\n") || strings.Count(last, "\n") != 1 || !strings.Contains(last, `"content":"<tool_call>\n{}\n</tool_call>"`) {
				t.Fatalf("appended %q", last)
			}
			if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 1 {
				t.Fatalf("left %v", entries)
			}
		})
	}
}

// Rollouts finishing together are written as whole lines, none lost.
func TestResultsConcurrentAppends(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.jsonl")
	w, _, err := openResults(path, false, false, sameEval)
	if err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("x", 200<<10) // past a pipe's atomic write, and bufio's buffers
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := Record{TaskID: fmt.Sprintf("t%d", i), Model: "m", Messages: []Message{{"assistant", big}}}
			if err := w.append(&r); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	w.close()
	seen := map[string]bool{}
	err = eachRecord(path, func(r *Record) error {
		if seen[r.TaskID] || r.Messages[0].Content != big {
			return fmt.Errorf("record %s twice or mangled", r.TaskID)
		}
		seen[r.TaskID] = true
		return nil
	})
	raw, _ := os.ReadFile(path)
	if err != nil || len(seen) != 64 || bytes.Count(raw, []byte("\n")) != 64 {
		t.Fatalf("%v: %d records", err, len(seen))
	}
}
