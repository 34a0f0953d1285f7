package history

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"sync"
)

// Table is a history held compactly, for checking: one 64-byte record per
// op, where an Op takes 224 bytes and two more allocations for its token
// and counter. A record keeps an op's type, process, f, time, lock, token,
// lock value, valid_until or store_time, n, removed, node and error, the
// strings as ids into the table's string table; an op with more than that
// (a nemesis op's targets, duration, point or roles; an index other than
// its position; both a valid_until and a store_time) is kept whole beside
// the records. At gives back each op exactly as it was recorded. A Table is
// read-only once built, and safe for concurrent readers. A nil *Table is
// an empty history.
type Table struct {
	recs []rec
	strs []string      // id → string; id 0 is ""
	full map[int32]*Op // the ops a rec does not hold, by position
	ids  map[string]uint32
}

// rec is one op of a Table. Its strings are ids into Table.strs.
type rec struct {
	time      int64
	token     uint64
	n         int64
	at        int64 // valid_until (recValidUntil) or store_time
	process   int32
	f         uint32
	lock      uint32
	lockValue uint32
	removed   uint32
	node      uint32
	err       uint32
	typ       uint8 // index into recTypes
	flags     uint8
}

const (
	recToken      = 1 << iota // token is set
	recN                      // n is set
	recValidUntil             // at is valid_until, not store_time
	recFull                   // the op is in Table.full
)

var recTypes = [...]Type{"", Invoke, OK, Fail, Info, Notice}

func typeCode(t Type) (uint8, bool) {
	for i, rt := range recTypes[1:] {
		if rt == t {
			return uint8(i + 1), true
		}
	}
	return 0, false
}

// fits reports whether op, at position pos, can be held by a rec.
func fits(op *Op, pos int) bool {
	v := &op.Value
	_, typed := typeCode(op.Type)
	return typed && op.Index == pos && op.Process == int(int32(op.Process)) &&
		len(v.Targets) == 0 && v.Duration == 0 && v.Point == "" && len(v.Roles) == 0 &&
		(v.ValidUntil == 0 || v.StoreTime == 0)
}

// NewTable returns h as a Table.
func NewTable(h History) *Table {
	t := &Table{recs: make([]rec, 0, len(h))}
	for i := range h {
		t.Append(h[i])
	}
	return t
}

// Append adds op at the end of t. It is for building a table, not for one
// that others read.
func (t *Table) Append(op Op) {
	if t.ids == nil {
		if len(t.strs) == 0 {
			t.strs = []string{""}
		}
		t.ids = make(map[string]uint32, len(t.strs))
		for i, s := range t.strs {
			t.ids[s] = uint32(i)
		}
	}
	if t.full == nil {
		t.full = make(map[int32]*Op)
	}
	id := func(s string) uint32 {
		i, ok := t.ids[s]
		if !ok {
			i = uint32(len(t.strs))
			t.strs = append(t.strs, s)
			t.ids[s] = i
		}
		return i
	}
	pos := len(t.recs)
	t.recs = append(t.recs, rec{})
	encode(&t.recs[pos], &op, pos, id, t.full)
}

// encode fills r with op, at position pos, taking string ids from id; an
// op that does not fit goes whole into full.
func encode(r *rec, op *Op, pos int, id func(string) uint32, full map[int32]*Op) {
	if !fits(op, pos) {
		c := *op
		if c.Value.Token != nil { // a parser's scratch op points into the parser
			c.Value.Token = Tok(*c.Value.Token)
		}
		if c.Value.N != nil {
			c.Value.N = Num(*c.Value.N)
		}
		full[int32(pos)] = &c
		*r = rec{time: op.Time, flags: recFull}
		return
	}
	v := &op.Value
	typ, _ := typeCode(op.Type)
	*r = rec{
		time: op.Time, process: int32(op.Process), typ: typ,
		f: id(op.F), lock: id(v.Lock), lockValue: id(v.LockValue),
		removed: id(v.Removed), node: id(v.Node), err: id(op.Error),
	}
	if v.Token != nil {
		r.token, r.flags = *v.Token, r.flags|recToken
	}
	if v.N != nil {
		r.n, r.flags = *v.N, r.flags|recN
	}
	if v.ValidUntil != 0 {
		r.at, r.flags = v.ValidUntil, r.flags|recValidUntil
	} else {
		r.at = v.StoreTime
	}
}

// Len returns the number of ops in t.
func (t *Table) Len() int {
	if t == nil {
		return 0
	}
	return len(t.recs)
}

// At returns op i, as it was recorded. Its Token and N, where set, point
// into t: they are not to be written through.
func (t *Table) At(i int) Op {
	r := &t.recs[i]
	if r.flags&recFull != 0 {
		return *t.full[int32(i)]
	}
	op := Op{
		Index: i, Type: recTypes[r.typ], Process: int(r.process), F: t.strs[r.f], Time: r.time,
		Error: t.strs[r.err],
		Value: Value{Lock: t.strs[r.lock], LockValue: t.strs[r.lockValue], Removed: t.strs[r.removed], Node: t.strs[r.node]},
	}
	if r.flags&recToken != 0 {
		op.Value.Token = &r.token
	}
	if r.flags&recN != 0 {
		op.Value.N = &r.n
	}
	if r.flags&recValidUntil != 0 {
		op.Value.ValidUntil = r.at
	} else {
		op.Value.StoreTime = r.at
	}
	return op
}

// Time returns the time of op i.
func (t *Table) Time(i int) int64 { return t.recs[i].time }

// Process returns the process of op i.
func (t *Table) Process(i int) int {
	if r := &t.recs[i]; r.flags&recFull == 0 {
		return int(r.process)
	}
	return t.full[int32(i)].Process
}

// Lock returns the lock of op i.
func (t *Table) Lock(i int) string {
	if r := &t.recs[i]; r.flags&recFull == 0 {
		return t.strs[r.lock]
	}
	return t.full[int32(i)].Value.Lock
}

// LockValue returns the lock value of op i.
func (t *Table) LockValue(i int) string {
	if r := &t.recs[i]; r.flags&recFull == 0 {
		return t.strs[r.lockValue]
	}
	return t.full[int32(i)].Value.LockValue
}

// Removed returns what the release op i removed.
func (t *Table) Removed(i int) string {
	if r := &t.recs[i]; r.flags&recFull == 0 {
		return t.strs[r.removed]
	}
	return t.full[int32(i)].Value.Removed
}

// Error returns the error of op i.
func (t *Table) Error(i int) string {
	if r := &t.recs[i]; r.flags&recFull == 0 {
		return t.strs[r.err]
	}
	return t.full[int32(i)].Error
}

// Token returns the token of op i, nil for none; it points into t.
func (t *Table) Token(i int) *uint64 {
	r := &t.recs[i]
	switch {
	case r.flags&recFull != 0:
		return t.full[int32(i)].Value.Token
	case r.flags&recToken != 0:
		return &r.token
	}
	return nil
}

// N returns the counter value of op i, nil for none; it points into t.
func (t *Table) N(i int) *int64 {
	r := &t.recs[i]
	switch {
	case r.flags&recFull != 0:
		return t.full[int32(i)].Value.N
	case r.flags&recN != 0:
		return &r.n
	}
	return nil
}

// ValidUntil returns the valid_until of op i.
func (t *Table) ValidUntil(i int) int64 {
	r := &t.recs[i]
	switch {
	case r.flags&recFull != 0:
		return t.full[int32(i)].Value.ValidUntil
	case r.flags&recValidUntil != 0:
		return r.at
	}
	return 0
}

// StoreTime returns the store_time of op i.
func (t *Table) StoreTime(i int) int64 {
	r := &t.recs[i]
	switch {
	case r.flags&recFull != 0:
		return t.full[int32(i)].Value.StoreTime
	case r.flags&recValidUntil == 0:
		return r.at
	}
	return 0
}

// F returns the f of op i.
func (t *Table) F(i int) string {
	if r := &t.recs[i]; r.flags&recFull == 0 {
		return t.strs[r.f]
	}
	return t.full[int32(i)].F
}

// Type returns the type of op i.
func (t *Table) Type(i int) Type {
	if r := &t.recs[i]; r.flags&recFull == 0 {
		return recTypes[r.typ]
	}
	return t.full[int32(i)].Type
}

// Index returns the index of op i: i, unless the op was recorded with
// another.
func (t *Table) Index(i int) int {
	if t.recs[i].flags&recFull == 0 {
		return i
	}
	return t.full[int32(i)].Index
}

// History returns t's ops as a History whose tokens and counters are its
// own, not t's.
func (t *Table) History() History {
	h := make(History, t.Len())
	var toks []uint64
	var ns []int64
	for i := range h {
		h[i] = t.At(i)
		v := &h[i].Value
		if v.Token != nil {
			if len(toks) == cap(toks) {
				toks = make([]uint64, 0, 1024)
			}
			toks = append(toks, *v.Token)
			v.Token = &toks[len(toks)-1]
		}
		if v.N != nil {
			if len(ns) == cap(ns) {
				ns = make([]int64, 0, 1024)
			}
			ns = append(ns, *v.N)
			v.N = &ns[len(ns)-1]
		}
	}
	return h
}

// Pair is History.Pair for t, in 32-bit positions.
func (t *Table) Pair() []int32 {
	pair := make([]int32, t.Len())
	open := make(map[int]int32)
	for i := range pair {
		pair[i] = -1
		proc := t.Process(i)
		switch t.Type(i) {
		case Invoke:
			open[proc] = int32(i)
			continue
		case Notice:
			continue
		}
		if inv, ok := open[proc]; ok {
			pair[i] = inv
			pair[inv] = int32(i)
			delete(open, proc)
		}
	}
	return pair
}

// ReadTable decodes the history file at path into a Table, with the
// checks and errors of Decode: on a bad line it returns the ops before it
// and a *LineError naming the line, the error naming the file. It parses
// the file's chunks on every core, each straight into its place in the
// table, and checks the ops in order last.
func ReadTable(path string) (*Table, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	t, err := readTable(f)
	if err != nil {
		return t, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// part is what a parser made of one span: its strings (local id k is
// strs[k-1]), its whole ops, and its first bad line's error.
type part struct {
	strs []string
	full map[int32]*Op
	err  error
}

func readTable(f *os.File) (*Table, error) {
	spans, lines, cut, err := splitLines(f)
	if err != nil {
		return &Table{}, err
	}
	t := &Table{recs: make([]rec, lines)}
	parts := make([]part, len(spans))
	next := make(chan int, len(spans))
	for i := range spans {
		next <- i
	}
	close(next)
	var wg sync.WaitGroup
	for range max(1, runtime.GOMAXPROCS(0)) {
		wg.Go(func() {
			fast := newFastParser()
			fast.scratch = true
			var buf []byte
			local := make(map[string]uint32)
			for i := range next {
				s, pt := spans[i], &parts[i]
				buf = slices.Grow(buf[:0], int(s.n))[:s.n]
				if _, err := f.ReadAt(buf, s.off); err != nil {
					pt.err = &LineError{s.first, err}
					continue
				}
				clear(local)
				pt.full = make(map[int32]*Op)
				id := func(str string) uint32 {
					if str == "" {
						return 0
					}
					if k, ok := local[str]; ok {
						return k
					}
					pt.strs = append(pt.strs, str)
					local[str] = uint32(len(pt.strs))
					return uint32(len(pt.strs))
				}
				data := buf
				var op Op
				for j := range s.line {
					nl := bytes.IndexByte(data, '\n')
					line := data[:nl]
					data = data[nl+1:]
					op = Op{}
					if err := parseLine(fast, line, &op); err != nil {
						pt.err = &LineError{s.first + j, err}
						break
					}
					pos := s.first - 1 + j
					encode(&t.recs[pos], &op, pos, id, pt.full)
				}
			}
		})
	}
	wg.Wait()

	// One string table: each span's local ids shift by the strings before it.
	end, endErr := lines, error(nil)
	for i, pt := range parts {
		if pt.err != nil {
			var le *LineError
			errors.As(pt.err, &le)
			end, endErr = le.Line-1, pt.err
			parts = parts[:i+1]
			break
		}
	}
	t.strs = []string{""}
	offs := make([]uint32, len(parts))
	for i, pt := range parts {
		offs[i] = uint32(len(t.strs) - 1)
		t.strs = append(t.strs, pt.strs...)
	}
	if len(t.strs) > math.MaxUint32 {
		return &Table{}, fmt.Errorf("too many distinct strings (%d) for one table", len(t.strs))
	}
	t.full = make(map[int32]*Op)
	next2 := make(chan int, len(parts))
	for i := range parts {
		next2 <- i
		for k, op := range parts[i].full {
			t.full[k] = op
		}
	}
	close(next2)
	for range max(1, runtime.GOMAXPROCS(0)) {
		wg.Go(func() {
			for i := range next2 {
				s, off := spans[i], offs[i]
				if off == 0 {
					continue
				}
				lo, hi := s.first-1, min(s.first-1+s.line, end)
				shift := func(id *uint32) {
					if *id != 0 {
						*id += off
					}
				}
				for k := lo; k < hi; k++ {
					r := &t.recs[k]
					if r.flags&recFull != 0 {
						continue
					}
					shift(&r.f)
					shift(&r.lock)
					shift(&r.lockValue)
					shift(&r.removed)
					shift(&r.node)
					shift(&r.err)
				}
			}
		})
	}
	wg.Wait()
	t.recs = t.recs[:end:end]

	var v validator
	for i := range t.recs {
		op := t.At(i)
		if err := v.check(&op, i+1); err != nil {
			t.recs = t.recs[:i:i]
			return t, err
		}
	}
	if endErr == nil && cut {
		endErr = &LineError{lines + 1, ErrTruncated}
	}
	return t, endErr
}

// parseLine decodes one line (without its newline) into the zeroed op: on
// the fast path when it can, with encoding/json and its exact errors
// otherwise. The error is a one-line reason.
func parseLine(fast *fastParser, line []byte, op *Op) error {
	if fast.parse(line, op) {
		return nil
	}
	*op = Op{}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(op); err != nil {
		*op = Op{}
		return jsonReason(err)
	}
	if dec.More() {
		*op = Op{}
		return errors.New("more than one value on the line")
	}
	return nil
}
