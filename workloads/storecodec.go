package workloads

import (
	"encoding/json"
	"strconv"

	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/internal/jsonscan"
)

// The store's lines are encoded by hand, byte for byte as encoding/json
// writes them, and decoded on a fast path that takes exactly what these
// encoders write, falling back to encoding/json for anything else: a
// store request costs the driver and the worker no reflection.

// appendRequest appends req's JSON to b.
func appendRequest(b []byte, req StoreRequest) []byte {
	b = append(b, `{"f":`...)
	b = history.AppendString(b, req.F)
	b = append(b, `,"process":`...)
	b = strconv.AppendInt(b, int64(req.Process), 10)
	b = append(b, `,"lock":`...)
	b = history.AppendString(b, req.Lock)
	if req.N != 0 {
		b = append(b, `,"n":`...)
		b = strconv.AppendInt(b, req.N, 10)
	}
	if req.Token != nil {
		b = append(b, `,"token":`...)
		b = strconv.AppendUint(b, *req.Token, 10)
	}
	if req.LockValue != "" {
		b = append(b, `,"lock_value":`...)
		b = history.AppendString(b, req.LockValue)
	}
	return append(b, '}')
}

// appendReply appends rep's JSON to b.
func appendReply(b []byte, rep StoreReply) []byte {
	b = append(b, `{"ok":`...)
	b = strconv.AppendBool(b, rep.OK)
	b = append(b, `,"n":`...)
	b = strconv.AppendInt(b, rep.N, 10)
	b = append(b, `,"time":`...)
	b = strconv.AppendInt(b, rep.Time, 10)
	if rep.Error != "" {
		b = append(b, `,"error":`...)
		b = history.AppendString(b, rep.Error)
	}
	return append(b, '}')
}

// appendEntry appends the JSON of StoreEntry{req, rep} to b: the request's
// fields and the reply under "reply".
func appendEntry(b []byte, req StoreRequest, rep StoreReply) []byte {
	b = appendRequest(b, req)
	b = append(b[:len(b)-1], `,"reply":`...)
	b = appendReply(b, rep)
	return append(b, '}')
}

// decodeRequest decodes one request line.
func decodeRequest(line []byte, req *StoreRequest) error {
	return decodeObject(line, req, func(key []byte, s *jsonscan.Scanner) bool {
		var ok bool
		switch string(key) {
		case "f":
			req.F, ok = s.Str()
		case "process":
			var n int64
			n, ok = s.Int()
			req.Process = int(n)
		case "lock":
			req.Lock, ok = s.Str()
		case "n":
			req.N, ok = s.Int()
		case "token":
			var tok uint64
			tok, ok = s.Uint()
			req.Token = &tok
		case "lock_value":
			req.LockValue, ok = s.Str()
		}
		return ok
	})
}

// decodeReply decodes one reply line.
func decodeReply(line []byte, rep *StoreReply) error {
	return decodeObject(line, rep, func(key []byte, s *jsonscan.Scanner) bool {
		var ok bool
		switch string(key) {
		case "ok":
			rep.OK, ok = s.Bool()
		case "n":
			rep.N, ok = s.Int()
		case "time":
			rep.Time, ok = s.Int()
		case "error":
			rep.Error, ok = s.Str()
		}
		return ok
	})
}

// decodeObject decodes line, one object with its newline or without, into
// *v, which it zeroes first. The fast path calls field with the scanner at
// each key's value, field storing the value in *v and reporting whether it
// could (an unknown key gives up); when it gives up, *v is zeroed again and
// line is decoded by encoding/json, whose error decodeObject returns.
func decodeObject[T any](line []byte, v *T, field func(key []byte, s *jsonscan.Scanner) bool) error {
	var zero T
	*v = zero
	obj := line
	if n := len(obj); n > 0 && obj[n-1] == '\n' {
		obj = obj[:n-1]
	}
	var s jsonscan.Scanner
	if s.ReadObject(obj, func(key []byte) bool { return field(key, &s) }) {
		return nil
	}
	*v = zero
	return json.Unmarshal(line, v)
}
