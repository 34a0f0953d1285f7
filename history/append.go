package history

import (
	"encoding/json"
	"strconv"
)

// AppendJSON appends op's JSON encoding to b, byte for byte what
// encoding/json writes for it (HTML characters escaped, as json.Marshal
// and a default json.Encoder do), without a newline, and returns the
// extended slice. It is the encoder of the history file and of the
// workers' op events: it writes the common ops without reflection or
// allocation, and leaves unusual strings and the Roles map to
// encoding/json.
func AppendJSON(b []byte, op Op) []byte {
	b = append(b, `{"index":`...)
	b = strconv.AppendInt(b, int64(op.Index), 10)
	b = append(b, `,"type":`...)
	b = appendString(b, string(op.Type))
	b = append(b, `,"process":`...)
	b = strconv.AppendInt(b, int64(op.Process), 10)
	b = append(b, `,"f":`...)
	b = appendString(b, op.F)
	b = append(b, `,"time":`...)
	b = strconv.AppendInt(b, op.Time, 10)
	b = append(b, `,"value":`...)
	b = appendValue(b, &op.Value)
	if op.Error != "" {
		b = append(b, `,"error":`...)
		b = appendString(b, op.Error)
	}
	return append(b, '}')
}

// appendValue appends v's JSON encoding to b: its fields in declaration
// order, each left out when it is empty, as encoding/json's omitempty does.
func appendValue(b []byte, v *Value) []byte {
	b = append(b, '{')
	start := len(b)
	field := func(name string) {
		if len(b) > start {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, name...)
		b = append(b, `":`...)
	}
	str := func(name, s string) {
		if s != "" {
			field(name)
			b = appendString(b, s)
		}
	}
	num := func(name string, n int64) {
		if n != 0 {
			field(name)
			b = strconv.AppendInt(b, n, 10)
		}
	}
	str("lock", v.Lock)
	if v.Token != nil {
		field("token")
		b = strconv.AppendUint(b, *v.Token, 10)
	}
	str("lock_value", v.LockValue)
	num("valid_until", v.ValidUntil)
	if v.N != nil {
		field("n")
		b = strconv.AppendInt(b, *v.N, 10)
	}
	num("store_time", v.StoreTime)
	str("removed", v.Removed)
	str("node", v.Node)
	if len(v.Targets) > 0 {
		field("targets")
		b = append(b, '[')
		for i, t := range v.Targets {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, t)
		}
		b = append(b, ']')
	}
	num("duration", v.Duration)
	str("point", v.Point)
	if len(v.Roles) > 0 {
		field("roles")
		m, _ := json.Marshal(v.Roles) // a map of strings always encodes
		b = append(b, m...)
	}
	return append(b, '}')
}

// AppendString appends s as a JSON string, byte for byte as encoding/json
// writes it: as is when it is printable ASCII that needs no escape, else
// escaped by encoding/json. It is for the other hand-written encoders of
// the harness's own lines.
func AppendString(b []byte, s string) []byte { return appendString(b, s) }

// appendString appends s as a JSON string: as is when it is printable
// ASCII that needs no escape, else as encoding/json escapes it.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always encodes
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
