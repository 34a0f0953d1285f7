package jsonscan

import (
	"encoding/json"
	"reflect"
	"testing"
)

// flat is the shape of object the tests scan: one of each kind of value.
type flat struct {
	S string `json:"s"`
	I int64  `json:"i"`
	U uint64 `json:"u"`
	B bool   `json:"b"`
}

// scan reads line as a flat object, or reports that the scanner refused it.
func scan(line string) (flat, bool) {
	var f flat
	var s Scanner
	ok := s.ReadObject([]byte(line), func(key []byte) bool {
		var ok bool
		switch string(key) {
		case "s":
			f.S, ok = s.Str()
		case "i":
			f.I, ok = s.Int()
		case "u":
			f.U, ok = s.Uint()
		case "b":
			f.B, ok = s.Bool()
		}
		return ok
	})
	return f, ok
}

// What the scanner takes it reads as encoding/json does; what it refuses
// (escapes, fractions, exponents, leading zeros, overflow, spaces, other
// keys, trailing bytes) it leaves to encoding/json.
func TestScannerReadsAsEncodingJSONOrRefuses(t *testing.T) {
	tests := []struct {
		line string
		take bool
	}{
		{`{}`, true},
		{`{"s":"lock-0","i":-9223372036854775808,"u":18446744073709551615,"b":true}`, true},
		{`{"i":0,"b":false}`, true},
		{`{"i":9223372036854775807}`, true},
		{`{"i":9223372036854775808}`, false},
		{`{"u":18446744073709551616}`, false},
		{`{"u":-1}`, false},
		{`{"i":1.5}`, false},
		{`{"i":1e3}`, false},
		{`{"i":007}`, false},
		{`{"i":-}`, false},
		{`{"s":"a\"b"}`, false},
		{`{"s":"é"}`, false},
		{`{"s": "a"}`, false},
		{`{"x":1}`, false},
		{`{"i":1} `, false},
		{`{"i":1`, false},
		{`{"b":tru}`, false},
		{`[1]`, false},
	}
	for _, tt := range tests {
		got, ok := scan(tt.line)
		if ok != tt.take {
			t.Errorf("%s: taken %v, want %v", tt.line, ok, tt.take)
			continue
		}
		if !ok {
			continue
		}
		var want flat
		if err := json.Unmarshal([]byte(tt.line), &want); err != nil {
			t.Errorf("%s: taken, but encoding/json refuses it: %v", tt.line, err)
		} else if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: read %+v, encoding/json %+v", tt.line, got, want)
		}
	}
}
