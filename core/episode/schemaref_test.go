package episode

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// A tool schema's $ref to a file is not followed: the env cannot make the
// engine read host files. (Refs within the schema still work.)
func TestToolSchemaRefsStayInside(t *testing.T) {
	file := filepath.Join(t.TempDir(), "string.json")
	if err := os.WriteFile(file, []byte(`{"type": "string"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, schema, args string
		wantErr            bool
	}{
		// Were the file read, {} (not a string) would be refused.
		{"file ref ignored", `{"$ref": "file://` + file + `"}`, `{}`, false},
		{"internal ref followed", `{"$defs": {"n": {"type": "integer"}}, "type": "object", "properties": {"n": {"$ref": "#/$defs/n"}}}`, `{"n": "x"}`, true},
		{"internal ref passes", `{"$defs": {"n": {"type": "integer"}}, "type": "object", "properties": {"n": {"$ref": "#/$defs/n"}}}`, `{"n": 3}`, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := &offered{tool: Tool{Name: "t", Parameters: json.RawMessage(tc.schema)}}
			if _, err := o.validate(json.RawMessage(tc.args)); (err != nil) != tc.wantErr {
				t.Fatalf("validate(%s) = %v, want error %v", tc.args, err, tc.wantErr)
			}
		})
	}
}
