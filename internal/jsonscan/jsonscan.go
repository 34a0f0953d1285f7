// Package jsonscan reads, fast and without reflection, the flat JSON
// objects locktest writes itself (history lines, the resource store's
// requests and replies): string keys, and values that are strings of
// printable ASCII without escapes, integers without fraction or exponent,
// booleans, or arrays of such strings. It refuses anything else, and its
// callers then hand the line to encoding/json, whose exact errors they
// keep. What it accepts it reads exactly as encoding/json would.
package jsonscan

import "math"

// Scanner reads one line at a time; its zero value is ready for Reset. It
// is not safe for concurrent use.
type Scanner struct {
	b []byte
	i int
}

// Reset makes s read line from its start.
func (s *Scanner) Reset(line []byte) { s.b, s.i = line, 0 }

// Done reports whether s has read the whole line.
func (s *Scanner) Done() bool { return s.i == len(s.b) }

// Object reads {"key":value,...}, calling field for each key with s at
// the key's value; field reads the value and reports whether it could.
// Object reports whether the whole object was read.
func (s *Scanner) Object(field func(key []byte) bool) bool {
	if !s.Eat('{') {
		return false
	}
	if s.Eat('}') {
		return true
	}
	for {
		key, ok := s.Raw()
		if !ok || !s.Eat(':') || !field(key) {
			return false
		}
		if s.Eat('}') {
			return true
		}
		if !s.Eat(',') {
			return false
		}
	}
}

// ReadObject makes s read line, which is to hold one object and nothing
// else: it resets s to line's start, reads the object as Object does,
// calling field for each key, and reports whether the object was read and
// was the whole line.
func (s *Scanner) ReadObject(line []byte, field func(key []byte) bool) bool {
	s.Reset(line)
	return s.Object(field) && s.Done()
}

// Eat reads the byte c, if it comes next.
func (s *Scanner) Eat(c byte) bool {
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// Raw reads a string of printable ASCII without escapes and returns its
// bytes, which alias the line.
func (s *Scanner) Raw() ([]byte, bool) {
	if !s.Eat('"') {
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

// Str reads a string as Raw does and returns a copy of it, which does not
// alias the line.
func (s *Scanner) Str() (string, bool) {
	b, ok := s.Raw()
	return string(b), ok
}

// Uint reads an integer without sign that fits a uint64.
func (s *Scanner) Uint() (uint64, bool) {
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
	if digits == 0 || (digits > 1 && s.b[start] == '0') {
		return 0, false
	}
	// A fraction or exponent is not an integer: leave it to encoding/json.
	if s.i < len(s.b) && (s.b[s.i] == '.' || s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		return 0, false
	}
	return n, true
}

// Int reads an integer that fits an int64.
func (s *Scanner) Int() (int64, bool) {
	neg := s.Eat('-')
	u, ok := s.Uint()
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

// Bool reads true or false.
func (s *Scanner) Bool() (bool, bool) {
	for _, w := range []string{"true", "false"} {
		if len(s.b)-s.i >= len(w) && string(s.b[s.i:s.i+len(w)]) == w {
			s.i += len(w)
			return w == "true", true
		}
	}
	return false, false
}
