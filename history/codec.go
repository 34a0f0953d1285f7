package history

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/locktest/locktest/internal/jsonscan"
	"github.com/locktest/locktest/internal/tick"
)

// Writer appends ops to a JSON-lines file. Every op is written with a single
// write call as soon as it is appended, so a driver that is killed leaves a
// file of whole lines; a background loop fsyncs the file every SyncEvery
// while there is something new, and Close fsyncs it, so a crash of the
// machine loses at most about SyncEvery of history.
//
// The first write or fsync error (a full disk, say) is final: the file is
// cut back to its last whole line, no later op is written (a file with a
// hole in it would not be a history), and Append and Close return that
// error, which says how many ops the file keeps. It is safe for concurrent
// use.
type Writer struct {
	mu      sync.Mutex
	f       *os.File
	buf     []byte // the line being written
	dirty   bool
	closing bool
	err     error // the first write or fsync error
	size    int64 // bytes of whole lines written
	ops     int   // ops written
	done    chan struct{}
	wg      sync.WaitGroup
}

// SyncEvery is the longest time written ops stay unsynced.
const SyncEvery = 100 * time.Millisecond

// Create creates (or truncates) the history file at path and starts its
// fsync loop; Close stops it.
func Create(path string) (*Writer, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	w := &Writer{f: f, done: make(chan struct{})}
	w.wg.Add(1)
	go w.syncLoop()
	return w, nil
}

// WriteFile writes h to path, creating or truncating it, one line per op
// as a Writer writes them, and syncs it: for histories made outside a run,
// generated or converted from another tool's record, that `locktest check`
// is to read. It writes the ops as they are; ReadFile is what checks them.
func WriteFile(path string, h History) error {
	w, err := Create(path)
	if err != nil {
		return err
	}
	for _, op := range h {
		if err := w.Append(op); err != nil {
			w.Close()
			return err
		}
	}
	return w.Close()
}

func (w *Writer) syncLoop() {
	defer w.wg.Done()
	tick.Every(SyncEvery, w.done, func() {
		w.mu.Lock()
		if w.dirty && w.f != nil && w.err == nil {
			w.dirty = false
			if err := w.f.Sync(); err != nil {
				w.fail(err)
			}
		}
		w.mu.Unlock()
	})
}

// Append writes op as one line. It returns an error if the write fails, or
// if an earlier write or fsync failed; then op is not in the file.
func (w *Writer) Append(op Op) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		return os.ErrClosed
	}
	if w.err != nil {
		return w.err
	}
	w.buf = append(AppendJSON(w.buf[:0], op), '\n')
	n, err := w.f.Write(w.buf)
	if err != nil {
		if n > 0 {
			// Half a line: cut it off, so the file ends with whole lines.
			// (Truncating frees space; it works on a full disk.)
			_ = w.f.Truncate(w.size)
		}
		w.fail(err)
		return w.err
	}
	w.size += int64(n)
	w.ops++
	w.dirty = true
	return nil
}

// fail makes err the writer's final error. w.mu must be held.
func (w *Writer) fail(err error) {
	if w.err == nil {
		w.err = fmt.Errorf("%w (the file keeps its first %d ops; nothing after them was written)", err, w.ops)
	}
}

// Close stops the fsync loop, fsyncs and closes the file. Closing twice is
// harmless.
func (w *Writer) Close() error {
	w.mu.Lock()
	if w.f == nil || w.closing {
		w.mu.Unlock()
		return nil
	}
	w.closing = true
	close(w.done)
	w.mu.Unlock()
	w.wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	var err error
	if w.err != nil {
		err = errors.Join(w.err, w.f.Close())
	} else {
		err = errors.Join(w.f.Sync(), w.f.Close())
	}
	w.f = nil
	return err
}

// LineError says which line of a history file is bad and why.
type LineError struct {
	Line int // 1-based
	Err  error
}

func (e *LineError) Error() string { return fmt.Sprintf("line %d: %v", e.Line, e.Err) }
func (e *LineError) Unwrap() error { return e.Err }

// ErrTruncated is the error of a history whose last line has no newline: a
// write that was cut short, by a crash of the machine or a full disk (a
// Writer writes each line in one call, and cuts back a line it could not
// write whole). Decode returns it in a *LineError naming that line, with
// every op before it, so a caller may check that prefix.
var ErrTruncated = errors.New("truncated: the last line has no newline")

// Decode reads a JSON-lines history. It rejects, with a *LineError naming
// the 1-based line and giving a one-line reason, a line that is not one JSON
// op (a truncated last line and a blank line included), a field whose value
// has the wrong JSON type, an unknown field, an op whose index is not its
// position, an unknown type, an op without f, a negative time, an op whose
// time is before the time of the previous op of the same process (each
// process records its ops one after another on one monotonic clock, so its
// times never go back; ops of different processes may arrive slightly out
// of time order and are accepted), a double invoke and a completion without
// its invoke. It never panics, whatever the input. The ops before the bad
// line are returned with the error; a last line without its newline gives
// ErrTruncated (see there).
func Decode(r io.Reader) (History, error) {
	return decode(r)
}

// decode is Decode. Parsing, the costly
// part, runs on every core, a chunk of lines at a time (parseChunks);
// checking the ops in order stays on one goroutine.
func decode(r io.Reader) (History, error) {
	var h History
	var v validator
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // stops the parsers at the first bad line
	chunks, free := parseChunks(ctx, r)
	for c := range chunks {
		for i := range c.ops {
			if err := v.check(&c.ops[i], c.first+i); err != nil {
				return h, err
			}
			h = append(h, c.ops[i])
		}
		if c.err != nil {
			return h, c.err
		}
		select {
		case free <- c: // its buffers serve again
		default:
		}
	}
	return h, nil
}

// validator checks a history's ops in order, each against the ops before
// it: its index, its time, and (admit) its place in its process's ops.
type validator struct {
	procs map[int]*procState
}

// procState is a process's previous op — its time and line — and its open
// invocation, if open.
type procState struct {
	time int64
	line int
	open bool
	inv  Op
}

// check checks op, the op of line (1-based), against the ops before it,
// and returns a *LineError when it is bad.
func (v *validator) check(op *Op, line int) error {
	if op.Index != line-1 {
		return &LineError{line, fmt.Errorf("index %d, want %d", op.Index, line-1)}
	}
	if op.Time < 0 {
		return &LineError{line, fmt.Errorf("negative time %d", op.Time)}
	}
	if v.procs == nil {
		v.procs = make(map[int]*procState)
	}
	p := v.procs[op.Process]
	if p == nil {
		p = &procState{time: op.Time, line: line}
		v.procs[op.Process] = p
	}
	if op.Time < p.time {
		return &LineError{line, fmt.Errorf("out of time order: process %d's op at time %d is before its previous op at time %d (line %d)",
			op.Process, op.Time, p.time, p.line)}
	}
	if err := admit(op, &p.inv, p.open); err != nil {
		return &LineError{line, err}
	}
	if op.Type != Notice {
		p.open = op.Type == Invoke
		if p.open {
			p.inv = *op
		}
	}
	p.time, p.line = op.Time, line
	return nil
}

// span is a run of whole lines of a file: its offset and length in bytes,
// its first line (1-based) and its number of lines.
type span struct {
	off, n      int64
	first, line int
}

// splitLines reads f once and cuts it into spans of whole lines of about
// chunkSize bytes. It returns them, the number of whole lines, and whether
// the file ends in a line without its newline.
func splitLines(f *os.File) (spans []span, lines int, cut bool, err error) {
	buf := make([]byte, chunkSize)
	var off, start, endNL int64 // file offset of buf; start of the current span; just after the last newline
	first, inSpan := 1, 0
	last := byte('\n')
	for {
		n, rerr := f.Read(buf)
		b := buf[:n]
		for len(b) > 0 {
			i := bytes.IndexByte(b, '\n')
			if i < 0 {
				break
			}
			inSpan++
			lines++
			b = b[i+1:]
			endNL = off + int64(n-len(b))
			if endNL-start >= chunkSize {
				spans = append(spans, span{start, endNL - start, first, inSpan})
				start, first, inSpan = endNL, lines+1, 0
			}
		}
		if n > 0 {
			last = buf[n-1]
		}
		off += int64(n)
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return nil, 0, false, &LineError{lines + 1, rerr}
		}
	}
	if inSpan > 0 {
		spans = append(spans, span{start, endNL - start, first, inSpan})
	}
	return spans, lines, last != '\n', nil
}

// chunkSize is about how many bytes of lines one parser takes at a time.
const chunkSize = 1 << 20

// chunk is a run of whole lines, from line first on (1-based), and once
// parsed its ops, up to its first bad line, whose *LineError is err.
type chunk struct {
	seq   int
	first int
	data  []byte
	ops   []Op
	err   error
	done  chan struct{}
}

// parseChunks reads r in chunks of whole lines, parses them on every core
// and yields them in order. A chunk with an error is the last one
// yielded; so is one that ends in a line without its newline
// (ErrTruncated) or a read error. A chunk the caller is done with may be
// handed back on free, whose buffers then take another chunk.
func parseChunks(ctx context.Context, r io.Reader) (chunks <-chan *chunk, free chan<- *chunk) {
	workers := max(1, runtime.GOMAXPROCS(0))
	todo := make(chan *chunk, workers)
	inOrder := make(chan *chunk, workers*2)
	out := make(chan *chunk)
	recycled := make(chan *chunk, workers*3+2)
	go func() {
		defer close(todo)
		defer close(inOrder)
		br := bufio.NewReaderSize(r, 1<<16)
		line, seq := 1, 0
		for ctx.Err() == nil {
			var data []byte
			var ops []Op
			select {
			case old := <-recycled:
				data, ops = old.data[:0], old.ops[:0]
			default:
				data = make([]byte, 0, chunkSize+1<<12)
			}
			c := &chunk{seq: seq, first: line, ops: ops, done: make(chan struct{})}
			var rerr error
			for len(data) < chunkSize {
				b, err := br.ReadSlice('\n')
				data = append(data, b...)
				if err == bufio.ErrBufferFull {
					continue // a long line: gather the rest of it
				}
				if err != nil {
					rerr = err
					break
				}
			}
			c.data = data
			n := bytes.Count(data, []byte{'\n'})
			switch {
			case rerr == io.EOF && len(data) > 0 && data[len(data)-1] != '\n':
				c.err = &LineError{line + n, ErrTruncated}
			case rerr != nil && rerr != io.EOF:
				c.err = &LineError{line + n, rerr}
			}
			select {
			case todo <- c:
			case <-ctx.Done():
				return
			}
			select {
			case inOrder <- c:
			case <-ctx.Done():
				return
			}
			if rerr != nil {
				return
			}
			line += n
			seq++
		}
	}()
	for range workers {
		go func() {
			p := newFastParser()
			for c := range todo {
				c.parse(p)
				close(c.done)
			}
		}()
	}
	go func() {
		defer close(out)
		for c := range inOrder {
			select {
			case <-c.done:
			case <-ctx.Done():
				return
			}
			select {
			case out <- c:
			case <-ctx.Done():
				return
			}
			if c.err != nil {
				return
			}
		}
	}()
	return out, recycled
}

// parse decodes c's whole lines into c.ops, up to the first bad line.
func (c *chunk) parse(fast *fastParser) {
	n := bytes.Count(c.data, []byte{'\n'})
	if cap(c.ops) < n {
		c.ops = make([]Op, n)
	}
	c.ops = c.ops[:n]
	clear(c.ops) // a recycled chunk's ops must not keep old strings alive
	parsed, err := parseLines(fast, c.data, c.first, c.ops)
	c.ops = c.ops[:parsed]
	if err != nil {
		c.err = err
	}
}

// parseLines decodes the whole lines of data, the first of which is line
// first (1-based), into the zeroed ops out, one per line, up to the first
// bad line. It returns how many it decoded and the bad line's
// *LineError. What follows the last newline (a cut line) is left alone.
func parseLines(fast *fastParser, data []byte, first int, out []Op) (int, error) {
	for i := range out {
		nl := bytes.IndexByte(data, '\n')
		if nl < 0 {
			return i, nil
		}
		if err := parseLine(fast, data[:nl], &out[i]); err != nil {
			return i, &LineError{first + i, err}
		}
		data = data[nl+1:]
	}
	return len(out), nil
}

// jsonReason turns a JSON decoding error into a one-line reason.
func jsonReason(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := te.Field
		if field == "" {
			field = "the op"
		}
		return fmt.Errorf("value of wrong type: %s is a JSON %s, want %s", field, te.Value, jsonKind(te.Type.String()))
	}
	return fmt.Errorf("not a JSON op: %s", strings.Join(strings.Fields(err.Error()), " "))
}

// jsonKind names the JSON kind a Go type of Op decodes from.
func jsonKind(goType string) string {
	switch strings.TrimPrefix(goType, "*") {
	case "int", "int64", "uint64":
		return "an integer"
	case "string", "history.Type":
		return "a string"
	case "[]string":
		return "an array of strings"
	case "history.Op":
		return "an object"
	case "history.Value":
		return "an object"
	}
	return goType
}

// ReadFile decodes the history file at path, with the checks and errors
// of Decode, faster: it reads a Table (ReadTable) and returns its ops.
// Errors name the file.
func ReadFile(path string) (History, error) {
	t, err := ReadTable(path)
	return t.History(), err
}

// fastParser decodes the lines Writer writes — one JSON object per line with
// the fields of Op, no whitespace, integers only, strings of printable
// ASCII without escapes — much faster than encoding/json, and refuses
// (parse returns false) anything else, which Decode then hands to
// encoding/json with its exact errors. What it accepts it decodes exactly as
// encoding/json would. It interns the strings it reads, since a history
// repeats a few lock names, functions and errors many times.
type fastParser struct {
	jsonscan.Scanner
	intern map[string]string
	limit  int // the most strings intern holds
	// scratch makes an op's Token and N point into the parser, which the
	// next parse overwrites, rather than into memory of their own: for a
	// caller that copies the op's values out at once (ReadTable).
	scratch bool
	tok     uint64
	n       int64
}

func newFastParser() *fastParser { return &fastParser{intern: make(map[string]string), limit: 1 << 16} }

// OpParser decodes one op line in the plain form AppendJSON writes for
// common ops, fast, and refuses anything else, which the caller then
// decodes with encoding/json. It is not safe for concurrent use.
type OpParser struct{ p *fastParser }

// NewOpParser returns a parser that shares the storage of at most
// internLimit distinct strings among the ops it decodes.
func NewOpParser(internLimit int) *OpParser {
	p := newFastParser()
	p.limit = internLimit
	return &OpParser{p}
}

// Parse decodes line (one JSON object, without its newline) into op and
// reports whether it could; when it could not, op holds a partial result.
func (o *OpParser) Parse(line []byte, op *Op) bool { return o.p.parse(line, op) }

// parse decodes line (without its newline) into op and reports whether it
// could.
func (p *fastParser) parse(line []byte, op *Op) bool {
	return p.ReadObject(line, func(key []byte) bool {
		var ok bool
		switch string(key) {
		case "index":
			op.Index, ok = p.int()
		case "type":
			var s string
			s, ok = p.str()
			op.Type = Type(s)
		case "process":
			op.Process, ok = p.int()
		case "f":
			op.F, ok = p.str()
		case "time":
			op.Time, ok = p.Int()
		case "error":
			op.Error, ok = p.str()
		case "value":
			ok = p.value(&op.Value)
		}
		return ok
	})
}

func (p *fastParser) value(v *Value) bool {
	return p.Object(func(key []byte) bool {
		var ok bool
		switch string(key) {
		case "lock":
			v.Lock, ok = p.str()
		case "token":
			v.Token, ok = readPtr(p, p.Uint, &p.tok)
		case "lock_value":
			v.LockValue, ok = p.str()
		case "valid_until":
			v.ValidUntil, ok = p.Int()
		case "n":
			v.N, ok = readPtr(p, p.Int, &p.n)
		case "store_time":
			v.StoreTime, ok = p.Int()
		case "removed":
			v.Removed, ok = p.str()
		case "node":
			v.Node, ok = p.str()
		case "targets":
			v.Targets, ok = p.strs()
		case "duration":
			v.Duration, ok = p.Int()
		case "point":
			v.Point, ok = p.str()
		}
		return ok
	})
}

// readPtr reads a value with read and returns a pointer to it, for Value's
// optional fields: with p.scratch a pointer to slot, which is p's own and
// which the next parse overwrites, otherwise a pointer to memory of its
// own. It returns the pointer even when read fails.
func readPtr[T any](p *fastParser, read func() (T, bool), slot *T) (*T, bool) {
	x, ok := read()
	if !p.scratch {
		slot = new(T)
	}
	*slot = x
	return slot, ok
}

// int reads an integer that fits an int64 and converts it to an int.
func (p *fastParser) int() (int, bool) {
	n, ok := p.Int()
	return int(n), ok
}

// str reads a string, interned.
func (p *fastParser) str() (string, bool) {
	b, ok := p.Raw()
	if !ok {
		return "", false
	}
	if s, ok := p.intern[string(b)]; ok {
		return s, true
	}
	s := string(b)
	if len(p.intern) < p.limit {
		p.intern[s] = s
	}
	return s, true
}

// strs reads an array of strings, interned.
func (p *fastParser) strs() ([]string, bool) {
	if !p.Eat('[') {
		return nil, false
	}
	out := []string{}
	if p.Eat(']') {
		return out, true
	}
	for {
		s, ok := p.str()
		if !ok {
			return nil, false
		}
		out = append(out, s)
		if p.Eat(']') {
			return out, true
		}
		if !p.Eat(',') {
			return nil, false
		}
	}
}
