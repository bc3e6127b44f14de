package qwen3coder

import (
	"context"
	"encoding/json"
	"math/big"
	"reflect"
	"strings"
	"testing"
)

func TestIndexSchema(t *testing.T) {
	tests := []struct {
		name   string
		schema string
		want   schemaIndex
	}{
		{"usual", `{"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}}`, schemaIndex{"a": classInteger, "b": classString}},
		{"no properties: every value a string", `{"type": "object", "q": {"type": "number"}}`, nil},
		{"anyOf without a type", `{"properties": {"a": {"anyOf": [{"type": "integer"}, {"type": "null"}]}, "b": {"anyOf": null, "type": "integer"}, "c": {"oneOf": []}}}`, schemaIndex{"a": classAnyOf, "b": classInteger, "c": classString}},
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
	idx := schemaIndex{"s": classString, "i": classInteger, "n": classNumber, "b": classBoolean, "c": classContainer, "x": classOther, "y": classAnyOf}
	long := strings.Repeat("9", 4301)
	tests := []struct {
		param, value, want, reason string
	}{
		{"s", "  keep  spaces ", `"  keep  spaces "`, ""},
		{"s", "None", `"None"`, ""},
		{"s", "nUlL", `null`, ""},
		{"unknown", "5", `"5"`, ""},
		{"i", "-0012", `-12`, ""},
		{"i", "١٢", `12`, ""},
		{"i", "none", ``, "parameter 'i' is not an integer: 'none'; write null for no value"},
		{"i", long, ``, "parameter 'i' has 4301 digits, more than the 4300 that Python's int() reads"},
		{"i", long[:4300], long[:4300], ""},
		{"b", "None", ``, "parameter 'b' is not a boolean (write true or false): 'None'; write null for no value"},
		{"c", "None", `null`, ""},
		{"c", `{"a": ` + long + `}`, ``, "parameter 'c' holds an integer of 4301 digits, more than the 4300 that Python reads"},
		{"c", `[1e400]`, ``, "parameter 'c' holds NaN or Infinity (or a number too large for a double), which JSON cannot carry; write a finite number, null or a string"},
		{"y", "5", `5`, ""},
		{"y", "None", `null`, ""},
		{"y", "hello", `"hello"`, ""},
		{"y", `{"a": NaN}`, ``, "parameter 'y' holds NaN or Infinity (or a number too large for a double), which JSON cannot carry; write a finite number, null or a string"},
		{"y", long, `"` + long + `"`, ""},
		{"y", "{1, 2}", ``, "parameter 'y' holds a Python set, which JSON cannot carry"},
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
		{"c", `{"a": Infinity}`, ``, "parameter 'c' holds NaN or Infinity (or a number too large for a double), which JSON cannot carry; write a finite number, null or a string"},
		{"c", `[1, 2`, ``, "parameter 'c' is not valid JSON: it ends at offset 5 before the value is complete"},
		{"c", `{1: 2j}`, ``, "parameter 'c' holds a Python complex, which JSON cannot carry"},
		{"x", `123`, `123`, ""},
		{"x", `hello`, `"hello"`, ""},
		{"x", `{1, 2}`, ``, "parameter 'x' holds a Python set, which JSON cannot carry"},
		{"x", `1e400`, ``, "parameter 'x' holds a NaN or infinite number, which JSON cannot carry"},
		{"x", long, `"` + long + `"`, ""},
		{"x", `'<b>'`, `"<b>"`, ""},
		// Written as read: tuples, duplicate keys, values overwritten.
		{"c", `[1, (2, (3,)), ()]`, `[1,[2,[3]],[]]`, ""},
		{"x", `1, 'a',`, `[1,"a"]`, ""},
		{"c", `{1: set(), True: 2, 1.0: 3, 'a': [1,], 'b': {}}`, `{"1":3,"a":[1],"b":{}}`, ""},
		{"c", `{'a': {'b': 1, 'b': 2}, 'c': [{1: 0}, {2: {3}}]}`, ``, "parameter 'c' holds a Python set, which JSON cannot carry"},
		{"c", `{'a': {'b': 1, 'b': 2}, 'c': -0x10}`, `{"a":{"b":2},"c":-16}`, ""},
		{"c", `[{(1,): 2}]`, ``, "parameter 'c' holds a dict key of type tuple, which JSON cannot carry"},
		{"c", `{0x` + strings.Repeat("f", 4000) + `: 1}`, ``, "parameter 'c' holds an integer of more than 4300 digits, which JSON cannot carry"},
		{"c", `[-0x` + strings.Repeat("f", 3571) + `]`, `[-` + hexDecimal(strings.Repeat("f", 3571)) + `]`, ""},
	}
	for _, tc := range tests {
		got, reason, err := convert(context.Background(), tc.param, tc.value, idx)
		if string(got) != tc.want || reason != tc.reason || err != nil {
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

func hexDecimal(h string) string {
	n, _ := new(big.Int).SetString(h, 16)
	return n.String()
}
