package config

import (
	"strings"
	"testing"
	"time"
)

type sample struct {
	Grace   Duration `json:"grace"`
	Dir     string   `json:"state_dir"`
	Pass    []string `json:"pass_env"`
	Workers int      `json:"workers"`
	hidden  int
}

func TestDecode(t *testing.T) {
	cases := []struct {
		name    string
		raw     string
		want    sample
		wantErr string
	}{
		{"empty keeps defaults", ``, sample{Grace: Duration(5 * time.Second), Workers: 2}, ""},
		{"null keeps defaults", `null`, sample{Grace: Duration(5 * time.Second), Workers: 2}, ""},
		{"sets given keys", `{"grace": "1m", "pass_env": ["A"]}`, sample{Grace: Duration(time.Minute), Workers: 2, Pass: []string{"A"}}, ""},
		{"unknown key lists the valid ones", `{"graec": "1s"}`, sample{}, `test config: unknown setting "graec"; the settings are: grace, pass_env, state_dir, workers`},
		{"bare number duration suggests a unit", `{"grace": 5}`, sample{}, `test config: grace: 5: a duration is a string with a unit, like "5s"`},
		{"bad duration", `{"grace": "soon"}`, sample{}, `test config: grace: "soon": not a duration`},
		{"negative duration", `{"grace": "-1s"}`, sample{}, `must not be negative`},
		{"wrong type names the key", `{"workers": "two"}`, sample{}, `test config: workers: a JSON string is not allowed here (want int)`},
		{"not an object", `[1]`, sample{}, `test config: must be a JSON object`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := sample{Grace: Duration(5 * time.Second), Workers: 2}
			err := Decode("test", []byte(tc.raw), &got)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Decode(%s) error = %v, want it to contain %q", tc.raw, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Decode(%s): %v", tc.raw, err)
			}
			if got.Grace != tc.want.Grace || got.Workers != tc.want.Workers || strings.Join(got.Pass, ",") != strings.Join(tc.want.Pass, ",") {
				t.Fatalf("Decode(%s) = %+v, want %+v", tc.raw, got, tc.want)
			}
		})
	}
}
