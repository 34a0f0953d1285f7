package workloads

import (
	"encoding/json"
	"math"
	"strconv"

	"github.com/locktest/locktest/history"
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
	*req = StoreRequest{}
	var tok uint64
	hasTok := false
	ok := scanObject(line, func(key []byte, s *scanner) bool {
		var ok bool
		switch string(key) {
		case "f":
			req.F, ok = s.str()
		case "process":
			var n int64
			n, ok = s.int()
			req.Process = int(n)
		case "lock":
			req.Lock, ok = s.str()
		case "n":
			req.N, ok = s.int()
		case "token":
			tok, ok = s.uint()
			hasTok = true
		case "lock_value":
			req.LockValue, ok = s.str()
		}
		return ok
	})
	if !ok {
		*req = StoreRequest{}
		return json.Unmarshal(line, req)
	}
	if hasTok {
		req.Token = &tok
	}
	return nil
}

// decodeReply decodes one reply line.
func decodeReply(line []byte, rep *StoreReply) error {
	*rep = StoreReply{}
	ok := scanObject(line, func(key []byte, s *scanner) bool {
		var ok bool
		switch string(key) {
		case "ok":
			rep.OK, ok = s.bool()
		case "n":
			rep.N, ok = s.int()
		case "time":
			rep.Time, ok = s.int()
		case "error":
			rep.Error, ok = s.str()
		}
		return ok
	})
	if !ok {
		*rep = StoreReply{}
		return json.Unmarshal(line, rep)
	}
	return nil
}

// scanner reads the flat JSON objects the encoders above write: string
// keys, and values that are strings of printable ASCII without escapes,
// integers or booleans. Anything else makes it give up.
type scanner struct {
	b []byte
	i int
}

// scanObject parses line, one object with its newline or without, calling
// field with the scanner at each key's value; an unknown key gives up.
func scanObject(line []byte, field func(key []byte, s *scanner) bool) bool {
	if n := len(line); n > 0 && line[n-1] == '\n' {
		line = line[:n-1]
	}
	s := &scanner{b: line}
	if !s.eat('{') {
		return false
	}
	if s.eat('}') {
		return s.i == len(s.b)
	}
	for {
		key, ok := s.raw()
		if !ok || !s.eat(':') || !field(key, s) {
			return false
		}
		if s.eat('}') {
			return s.i == len(s.b)
		}
		if !s.eat(',') {
			return false
		}
	}
}

func (s *scanner) eat(c byte) bool {
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

func (s *scanner) raw() ([]byte, bool) {
	if !s.eat('"') {
		return nil, false
	}
	start := s.i
	for ; s.i < len(s.b); s.i++ {
		switch c := s.b[s.i]; {
		case c == '"':
			s.i++
			return s.b[start : s.i-1], true
		case c < 0x20 || c >= 0x7f || c == '\\':
			return nil, false
		}
	}
	return nil, false
}

func (s *scanner) str() (string, bool) {
	b, ok := s.raw()
	return string(b), ok
}

// uint parses an integer without sign that fits a uint64.
func (s *scanner) uint() (uint64, bool) {
	start := s.i
	var n uint64
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		d := uint64(s.b[s.i] - '0')
		if n > (math.MaxUint64-d)/10 {
			return 0, false
		}
		n = n*10 + d
		s.i++
	}
	digits := s.i - start
	return n, digits > 0 && (digits == 1 || s.b[start] != '0')
}

// int parses an integer that fits an int64.
func (s *scanner) int() (int64, bool) {
	neg := s.eat('-')
	u, ok := s.uint()
	switch {
	case !ok:
		return 0, false
	case neg && u <= 1<<63:
		return -int64(u-1) - 1, true
	case !neg && u < 1<<63:
		return int64(u), true
	}
	return 0, false
}

func (s *scanner) bool() (bool, bool) {
	for _, w := range []string{"true", "false"} {
		if len(s.b)-s.i >= len(w) && string(s.b[s.i:s.i+len(w)]) == w {
			s.i += len(w)
			return w == "true", true
		}
	}
	return false, false
}
