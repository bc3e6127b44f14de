package hostenv

import "testing"

func TestLabelsMatch(t *testing.T) {
	have := map[string]string{"run": "r1", "task": "t"}
	for _, tc := range []struct {
		name string
		have map[string]string
		want map[string]string
		ok   bool
	}{
		{"no filter", have, nil, true},
		{"empty filter", have, map[string]string{}, true},
		{"one matches", have, map[string]string{"run": "r1"}, true},
		{"all match", have, map[string]string{"run": "r1", "task": "t"}, true},
		{"value differs", have, map[string]string{"run": "r2"}, false},
		{"key missing", have, map[string]string{"other": ""}, false},
		{"empty value needs the key", map[string]string{}, map[string]string{"run": ""}, false},
		{"no labels, a filter", nil, map[string]string{"run": "r1"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := LabelsMatch(tc.have, tc.want); got != tc.ok {
				t.Fatalf("LabelsMatch(%v, %v) = %v, want %v", tc.have, tc.want, got, tc.ok)
			}
		})
	}
}

func TestCopyLabels(t *testing.T) {
	for _, in := range []map[string]string{nil, {}, {"a": "1", "b": "2"}} {
		out := CopyLabels(in)
		if out == nil || len(out) != len(in) {
			t.Fatalf("CopyLabels(%v) = %v", in, out)
		}
		for k, v := range in {
			if out[k] != v {
				t.Fatalf("CopyLabels(%v)[%q] = %q", in, k, out[k])
			}
		}
		out["new"] = "x"
		if _, ok := in["new"]; ok {
			t.Fatal("the copy shares the original's map")
		}
	}
}
