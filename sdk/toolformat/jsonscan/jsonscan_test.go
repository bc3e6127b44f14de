package jsonscan

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestMembers(t *testing.T) {
	tests := []struct {
		src      string
		isObject bool
		want     [][2]string // raw key, raw value
	}{
		{`{}`, true, nil},
		{` { "a" : 1 , "b":[1,{"c":"}"}], "d\"e": "x,y" } `, true,
			[][2]string{{`"a"`, `1`}, {`"b"`, `[1,{"c":"}"}]`}, {`"d\"e"`, `"x,y"`}}},
		{`{"n":null,"t":true,"f":-1.5e3,"o":{}}`, true,
			[][2]string{{`"n"`, `null`}, {`"t"`, `true`}, {`"f"`, `-1.5e3`}, {`"o"`, `{}`}}},
		{`[1,2]`, false, nil},
		{`"s"`, false, nil},
		{`  `, false, nil},
	}
	for _, tc := range tests {
		if tc.src != "  " && !json.Valid([]byte(tc.src)) {
			t.Fatalf("test input %q is not valid JSON", tc.src)
		}
		var got [][2]string
		isObject := Members([]byte(tc.src), func(k, v []byte) { got = append(got, [2]string{string(k), string(v)}) })
		if isObject != tc.isObject || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Members(%s) = %v, %q; want %v, %q", tc.src, isObject, got, tc.isObject, tc.want)
		}
	}
}
