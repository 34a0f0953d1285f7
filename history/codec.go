package history

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// Writer appends ops to a JSON-lines file. Every op is written with a single
// write call as soon as it is appended, so a driver that is killed leaves a
// file of whole lines; a background loop fsyncs the file every SyncEvery
// while there is something new, and Close fsyncs it, so a crash of the
// machine loses at most about SyncEvery of history. It is safe for
// concurrent use.
type Writer struct {
	mu      sync.Mutex
	f       *os.File
	buf     bytes.Buffer
	enc     *json.Encoder // writes into buf
	dirty   bool
	closing bool
	err     error // the first fsync error of the background loop
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
	w.enc = json.NewEncoder(&w.buf)
	w.wg.Add(1)
	go w.syncLoop()
	return w, nil
}

func (w *Writer) syncLoop() {
	defer w.wg.Done()
	t := time.NewTicker(SyncEvery)
	defer t.Stop()
	for {
		select {
		case <-w.done:
			return
		case <-t.C:
			w.mu.Lock()
			if w.dirty && w.f != nil {
				w.dirty = false
				if err := w.f.Sync(); err != nil && w.err == nil {
					w.err = err
				}
			}
			w.mu.Unlock()
		}
	}
}

// Append writes op as one line. It returns an error if the write fails, or
// if an earlier background fsync failed.
func (w *Writer) Append(op Op) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		return os.ErrClosed
	}
	if w.err != nil {
		return w.err
	}
	w.buf.Reset()
	if err := w.enc.Encode(op); err != nil {
		return err
	}
	if _, err := w.f.Write(w.buf.Bytes()); err != nil {
		return err
	}
	w.dirty = true
	return nil
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
	err := errors.Join(w.err, w.f.Sync(), w.f.Close())
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

// Decode reads a JSON-lines history. It rejects, with a *LineError naming
// the 1-based line, a line that is not one JSON op (a truncated last line
// included), an op whose index is not its position, an unknown type, a
// double invoke and a completion without its invoke. Blank lines are not
// allowed either: a history is written one op per line.
func Decode(r io.Reader) (History, error) {
	rec := NewRecorder(nil)
	br := bufio.NewReaderSize(r, 1<<16)
	for line := 1; ; line++ {
		b, err := br.ReadBytes('\n')
		if len(b) == 0 && err == io.EOF {
			return rec.ops, nil
		}
		if err != nil && err != io.EOF {
			return rec.ops, &LineError{line, err}
		}
		if err == io.EOF {
			return rec.ops, &LineError{line, errors.New("truncated: the last line has no newline")}
		}
		var op Op
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&op); err != nil {
			return rec.ops, &LineError{line, fmt.Errorf("not a JSON op: %v", err)}
		}
		if dec.More() {
			return rec.ops, &LineError{line, errors.New("more than one value on the line")}
		}
		if op.Index != line-1 {
			return rec.ops, &LineError{line, fmt.Errorf("index %d, want %d", op.Index, line-1)}
		}
		if _, err := rec.Record(op); err != nil {
			return rec.ops, &LineError{line, err}
		}
	}
}

// ReadFile decodes the history file at path. Errors name the file.
func ReadFile(path string) (History, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h, err := Decode(f)
	if err != nil {
		return h, fmt.Errorf("%s: %w", path, err)
	}
	return h, nil
}
