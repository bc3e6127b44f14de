package qwen3coder

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestIndexSchema(t *testing.T) {
	tests := []struct {
		name   string
		schema string
		want   schemaIndex
	}{
		{"usual", `{"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}}`, schemaIndex{"a": classInteger, "b": classString}},
		{"no properties: the parameters object itself", `{"type": "object", "q": {"type": "number"}}`, schemaIndex{"type": classString, "q": classNumber}},
		{"boolean schema", `{"properties": {"a": true}}`, schemaIndex{"a": classString}},
		{"null schema", `{"properties": {"a": null}}`, schemaIndex{"a": classString}},
		{"no type", `{"properties": {"a": {"description": "x"}}}`, schemaIndex{"a": classString}},
		{"keys are case-sensitive", `{"properties": {"a": {"Type": "integer"}}, "Properties": {"b": {}}}`, schemaIndex{"a": classString}},
		{"last duplicate wins", `{"properties": {"a": {"type": "integer", "type": "boolean"}}}`, schemaIndex{"a": classBoolean}},
		{"escaped names", `{"properties": {"\u0061": {"type": "num\u0062er"}}}`, schemaIndex{"a": classNumber}},
		{"type list", `{"properties": {"a": {"type": ["integer", "null"]}}}`, schemaIndex{"a": classOther}},
		{"type stripped and lowered", `{"properties": {"a": {"type": " Integer\n"}}}`, schemaIndex{"a": classInteger}},
		{"type prefixes", `{"properties": {"i": {"type": "int64"}, "u": {"type": "uint8"}, "f": {"type": "float32"}, "d": {"type": "dict[str, int]"}, "l": {"type": "List"}, "e": {"type": "enum"}, "x": {"type": "any"}}}`,
			schemaIndex{"i": classInteger, "u": classInteger, "f": classNumber, "d": classContainer, "l": classContainer, "e": classString, "x": classOther}},
		{"properties not an object", `{"properties": ["a"]}`, nil},
		{"not an object", `[1]`, nil},
		{"not JSON", `{"properties": `, nil},
		{"empty", ``, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := indexSchema(json.RawMessage(tc.schema)); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("indexSchema(%s) = %v, want %v", tc.schema, got, tc.want)
			}
		})
	}
}

func TestConvert(t *testing.T) {
	idx := schemaIndex{"s": classString, "i": classInteger, "n": classNumber, "b": classBoolean, "c": classContainer, "x": classOther}
	tests := []struct {
		param, value, want, reason string
	}{
		{"s", "  keep  spaces ", `"  keep  spaces "`, ""},
		{"s", "None", `"None"`, ""},
		{"s", "nUlL", `null`, ""},
		{"unknown", "5", `"5"`, ""},
		{"i", "-0012", `-12`, ""},
		{"i", "١٢", `12`, ""},
		{"i", "none", `null`, ""},
		{"i", "1.5", ``, "parameter 'i' is not an integer: '1.5'"},
		{"n", "1e400", ``, "parameter 'n' is not a finite number: '1e400'"},
		{"n", "-2.50", `-2.5`, ""},
		{"n", "1e-05", `1e-05`, ""},
		{"n", "12.0", `12`, ""},
		{"n", "abc", ``, "parameter 'n' is not a number: 'abc'"},
		{"b", "TRUE", `true`, ""},
		{"b", " true", ``, "parameter 'b' is not a boolean (write true or false): ' true'"},
		{"c", `{"a": [1, 2.50]}`, `{"a":[1,2.50]}`, ""},
		{"c", `{'a': (1, None), 'b': 1e16}`, `{"a":[1,null],"b":1e+16}`, ""},
		{"c", `{"a": Infinity}`, ``, "parameter 'c' holds NaN or Infinity, which JSON cannot carry; write a finite number, null or a string"},
		{"c", `[1, 2`, ``, "parameter 'c' is not valid JSON: it ends at offset 5 before the value is complete"},
		{"c", `{1: 2j}`, ``, "parameter 'c' holds a Python complex, which JSON cannot carry"},
		{"x", `123`, `123`, ""},
		{"x", `hello`, `"hello"`, ""},
		{"x", `{1, 2}`, `"{1, 2}"`, ""},
		{"x", `'<b>'`, `"<b>"`, ""},
	}
	for _, tc := range tests {
		got, reason := convert(tc.param, tc.value, idx)
		if string(got) != tc.want || reason != tc.reason {
			t.Errorf("convert(%s, %q) = %s, %q; want %s, %q", tc.param, tc.value, got, reason, tc.want, tc.reason)
		}
	}
}

func TestPyFloatRepr(t *testing.T) {
	for f, want := range map[float64]string{
		1: "1.0", 0.1: "0.1", 1e16: "1e+16", 1e15: "1000000000000000.0", 1e-5: "1e-05", 0.0001: "0.0001",
		-2.5e-7: "-2.5e-07", 123.456: "123.456", 5e-324: "5e-324", 1.7976931348623157e308: "1.7976931348623157e+308",
	} {
		if got := pyFloatRepr(f); got != want {
			t.Errorf("pyFloatRepr(%v) = %s, want %s", f, got, want)
		}
	}
}
