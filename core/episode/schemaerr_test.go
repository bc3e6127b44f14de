package episode

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// A call failing its schema in many places gets a short error: the first
// few failures with where they are, and how many more.
func TestSchemaErrorListsAFewAndCounts(t *testing.T) {
	schema := `{"type":"object","properties":{"s":{"type":"array","items":{"type":"integer"}},` +
		`"n":{"$ref":"#/$defs/n"},"m":{"anyOf":[{"type":"string"},{"type":"integer"}]}},"$defs":{"n":{"type":"integer"}}}`
	o := &offered{tool: Tool{Name: "t", Parameters: json.RawMessage(schema)}}
	cases := []struct {
		args string
		want []string
	}{
		{`{"s": [1, "x", 2]}`, []string{"at /s/1: got string, want integer"}},
		{`{"n": "x", "m": true}`, []string{"at /n: got string, want integer", "at /m: 'anyOf' failed", "at /m: got boolean, want string"}},
		{`{"s": [` + strings.Repeat(`"x",`, 999) + `"x"]}`, []string{"at /s/0: got string", "at /s/9: got string", "; and 990 more"}},
	}
	for _, tc := range cases {
		_, err := o.validate(json.RawMessage(tc.args))
		if err == nil {
			t.Fatalf("%.40s: no error", tc.args)
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%.40s: %q lacks %q", tc.args, err, w)
			}
		}
		if strings.Contains(err.Error(), "urn:") || strings.Contains(err.Error(), "at /s/10:") {
			t.Errorf("%.40s: %q names the schema URL or lists past the tenth failure", tc.args, err)
		}
	}
}

func TestCountJSONValues(t *testing.T) {
	cases := []struct {
		in   string
		want int
	}{
		{`{}`, 1},
		{`{"a": 1}`, 3},
		{`{"a": [1, -2.5e3, true, null, "x\"y"]}`, 8},
		{`{"a": {"b": []}}`, 5},
		{`[` + strings.Repeat(`0,`, 99) + `0]`, 101},
	}
	for _, tc := range cases {
		if got := countJSONValues([]byte(tc.in), 1000); got != tc.want {
			t.Errorf("countJSONValues(%.30s) = %d, want %d", tc.in, got, tc.want)
		}
	}
	big := []byte(`[` + strings.Repeat(`0,`, 1_000_000) + `0]`)
	if got := countJSONValues(big, 50); got != 51 {
		t.Errorf("the count should stop just past the limit: %d", got)
	}
	if err := checkArgumentSize(big, 50); err == nil || !strings.Contains(err.Error(), fmt.Sprint(50)) {
		t.Errorf("checkArgumentSize: %v", err)
	}
}
