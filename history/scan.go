package history

import (
	"context"
	"errors"
	"fmt"
	"os"
)

// Scan reads the history file at path and gives f each op, in the file's
// order, with the checks and errors of Decode, keeping none of them: its
// memory is a few chunks of lines, however long the file is. The op f gets
// is Scan's own, reused after the call: f copies what it keeps (a copy of
// *op stays valid). Scan stops at
// the first error f returns, and returns it; on a bad line it returns a
// *LineError naming the line, after f has had every op before it, the
// error naming the file. n is the number of ops f took without an error.
func Scan(ctx context.Context, path string, f func(op *Op) error) (n int, err error) {
	file, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer file.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // stops the parsers at the first error
	var v validator
	chunks, free := parseChunks(ctx, file)
	for c := range chunks {
		for i := range c.ops {
			if err := v.check(&c.ops[i], c.first+i); err != nil {
				return n, fmt.Errorf("%s: %w", path, err)
			}
			if err := f(&c.ops[i]); err != nil {
				return n, err
			}
			n++
		}
		if c.err != nil {
			return n, fmt.Errorf("%s: %w", path, c.err)
		}
		select {
		case free <- c: // its buffers serve again
		default:
		}
	}
	if err := ctx.Err(); err != nil {
		return n, err
	}
	return n, nil
}

// errEnough stops ReadTableHead's scan.
var errEnough = errors.New("enough ops")

// ReadTableHead reads the first n ops of the history file at path into a
// Table (every op, when the file has n or fewer), with Scan's checks and
// errors; what follows them is not read.
func ReadTableHead(ctx context.Context, path string, n int) (*Table, error) {
	t := &Table{}
	_, err := Scan(ctx, path, func(op *Op) error {
		if t.Len() >= n {
			return errEnough
		}
		t.Append(*op)
		return nil
	})
	if errors.Is(err, errEnough) {
		err = nil
	}
	return t, err
}
