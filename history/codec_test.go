package history

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestDecodeRejectsBadLinesWithTheirNumberAndAReason(t *testing.T) {
	good, err := os.ReadFile(writeHistory(t, sample))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(good), "\n")
	tests := []struct {
		name     string
		content  string
		wantLine int
		wantText string
	}{
		{"negative time", strings.Replace(lines[0], `"time":10`, `"time":-10`, 1), 1, "negative time -10"},
		{"completion before its invocation", lines[0] + strings.Replace(lines[1], `"time":20`, `"time":5`, 1), 2, "out of time order: process 0's op at time 5 is before its previous op at time 10 (line 1)"},
		{"process goes back in time", strings.Join(lines[:4], "") + strings.Replace(lines[4], `"time":30`, `"time":15`, 1), 5, "out of time order"},
		{"completion without invoke", lines[0] + lines[1] + strings.Replace(lines[3], `"index":3`, `"index":2`, 1), 3, "completion without invoke"},
		{"unknown op type", strings.Replace(lines[0], `"invoke"`, `"started"`, 1), 1, `unknown op type "started"`},
		{"token is a string", lines[0] + strings.Replace(lines[1], `"token":0`, `"token":"zero"`, 1), 2, "value of wrong type: value.token is a JSON string, want an integer"},
		{"time is a float", strings.Replace(lines[0], `"time":10`, `"time":10.5`, 1), 1, "value of wrong type: time is a JSON number 10.5, want an integer"},
		{"process is a string", strings.Replace(lines[0], `"process":0`, `"process":"p0"`, 1), 1, "value of wrong type: process is a JSON string, want an integer"},
		{"value is a string", strings.Replace(lines[0], `"value":{"lock":"l"}`, `"value":"l"`, 1), 1, "value of wrong type: value is a JSON string, want an object"},
		{"targets is a string", strings.Join(lines[:3], "") + strings.Replace(lines[3], `"targets":["p0"]`, `"targets":"p0"`, 1), 4, "value of wrong type: value.targets is a JSON string, want an array of strings"},
		{"op is an array", "[1,2]\n", 1, "value of wrong type: the op is a JSON array, want an object"},
		{"op without f", strings.Replace(lines[0], `"f":"acquire",`, ``, 1), 1, "op without f"},
		{"two values", strings.TrimSuffix(lines[0], "\n") + " {}\n", 1, "more than one value"},
		{"truncated mid-line", string(good[:len(good)-15]), 6, "truncated"},
		{"corrupt line", lines[0] + lines[1] + "{\"index\":2,\"type\":\"invoke\",\n" + strings.Join(lines[3:], ""), 3, "not a JSON op"},
		{"garbage", lines[0] + "hello\n", 2, "not a JSON op"},
		{"unknown type", lines[0] + strings.Replace(lines[1], `"ok"`, `"maybe"`, 1), 2, "unknown op type"},
		{"unknown field", lines[0] + strings.Replace(lines[1], `"f":`, `"bogus":1,"f":`, 1), 2, "unknown field"},
		{"index out of place", lines[1], 1, "index 1, want 0"},
		{"completion without invoke", strings.Replace(lines[1], `"index":1`, `"index":0`, 1), 1, "completion without invoke"},
		{"blank line", lines[0] + "\n", 2, "not a JSON op"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := decodeBoth(t, []byte(tt.content))
			var le *LineError
			if !errors.As(err, &le) {
				t.Fatalf("err %v, want a LineError", err)
			}
			if le.Line != tt.wantLine || !strings.Contains(err.Error(), tt.wantText) {
				t.Fatalf("err %q, want line %d containing %q", err, tt.wantLine, tt.wantText)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("the reason spans lines: %q", err)
			}
			if len(h) != tt.wantLine-1 {
				t.Errorf("returned %d ops, want the %d before the bad line", len(h), tt.wantLine-1)
			}
		})
	}
}

func TestDecodeAcceptsProcessesSlightlyOutOfTimeOrder(t *testing.T) {
	// Two processes' ops arrive swapped: the history is fine.
	ops := []Op{
		{Type: Invoke, Process: 0, F: Acquire, Time: 10, Value: Value{Lock: "l"}},
		{Type: Invoke, Process: 1, F: Acquire, Time: 12, Value: Value{Lock: "l"}},
		{Type: Fail, Process: 0, F: Acquire, Time: 11, Value: Value{Lock: "l"}},
		{Type: Fail, Process: 1, F: Acquire, Time: 12, Value: Value{Lock: "l"}},
	}
	h, err := ReadFile(writeHistory(t, ops))
	if err != nil || len(h) != len(ops) {
		t.Fatalf("h %v, err %v", h, err)
	}
}

// FuzzDecode feeds the decoder arbitrary bytes: it must never panic, must
// either accept the whole input or name a line within it, and what it
// accepts must be a well-formed history that re-encodes to an equal one.
func FuzzDecode(f *testing.F) {
	var buf bytes.Buffer
	for i, op := range sample {
		op.Index = i
		fmt.Fprintln(&buf, op.String())
	}
	good := buf.String()
	f.Add([]byte(good))
	f.Add([]byte(good[:len(good)-7]))
	f.Add([]byte(strings.Replace(good, `"time":20`, `"time":-20`, 1)))
	f.Add([]byte(strings.Replace(good, `"token":0`, `"token":"x"`, 1)))
	f.Add([]byte("{}\n"))
	f.Add([]byte("\n\n"))
	f.Add([]byte(`{"index":0,"type":"ok","process":1,"f":"acquire","time":1}` + "\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := Decode(bytes.NewReader(b))
		lines := bytes.Count(b, []byte("\n")) + 1
		if err != nil {
			var le *LineError
			if !errors.As(err, &le) {
				t.Fatalf("error without a line: %v", err)
			}
			if le.Line < 1 || le.Line > lines {
				t.Fatalf("line %d outside the input's %d lines: %v", le.Line, lines, err)
			}
			if len(h) != le.Line-1 {
				t.Fatalf("%d ops before bad line %d", len(h), le.Line)
			}
			return
		}
		var out bytes.Buffer
		for i, op := range h {
			if op.Index != i || !op.Type.Valid() || op.F == "" || op.Time < 0 {
				t.Fatalf("accepted a bad op %d: %s", i, op)
			}
			fmt.Fprintln(&out, op.String())
		}
		h2, err := Decode(&out)
		if err != nil || len(h2) != len(h) {
			t.Fatalf("re-decoding the accepted history: %d ops, %v", len(h2), err)
		}
	})
}

// FuzzFastParser checks that whatever line the fast parser accepts,
// encoding/json (strict, as Decode's slow path) accepts too and decodes to
// the same op.
func FuzzFastParser(f *testing.F) {
	for i, op := range sample {
		op.Index = i
		f.Add(op.String())
	}
	f.Add(`{"index":0,"type":"invoke","process":-1,"f":"kill-node","time":0,"value":{"targets":[],"duration":-0}}`)
	f.Add(`{"index":0,"value":{"token":18446744073709551615,"n":-9223372036854775808},"value":{"lock":"x"}}`)
	f.Add(`{"index":01}`)
	f.Add(`{"time":1e3}`)
	f.Add(`{"f":"a\u0041"}`)
	f.Fuzz(func(t *testing.T, line string) {
		var fast Op
		if !newFastParser().parse([]byte(line), &fast) {
			return
		}
		var slow Op
		dec := json.NewDecoder(strings.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&slow); err != nil || dec.More() {
			t.Fatalf("fast accepted %q, encoding/json refused it: %v", line, err)
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("%q:\nfast %#v\nslow %#v", line, fast, slow)
		}
	})
}

func TestDecodeReadsLinesLongerThanItsBuffer(t *testing.T) {
	op := Op{Type: Invoke, Process: -1, F: "partition", Value: Value{Targets: make([]string, 30_000)}}
	for i := range op.Value.Targets {
		op.Value.Targets[i] = fmt.Sprintf("n%d", i)
	}
	h, err := Decode(strings.NewReader(op.String() + "\n" + strings.Replace(op.String(), `"index":0`, `"index":1`, 1)[:100] + "\n"))
	var le *LineError
	if len(h) != 1 || len(h[0].Value.Targets) != 30_000 || h[0].Value.Targets[29_999] != "n29999" || !errors.As(err, &le) || le.Line != 2 {
		t.Fatalf("%d ops, err %v", len(h), err)
	}
}

// A history of several parse chunks is read whole, and a bad line deep
// in it, in any chunk, is found with its number and every op before it.
func TestDecodeOfManyChunksFindsTheFirstBadLine(t *testing.T) {
	var b bytes.Buffer
	const sections = 30_000 // about 4 MB: several chunks
	for k := range sections {
		for j, typ := range []Type{Invoke, OK} {
			op := Op{Index: 2*k + j, Type: typ, Process: k % 7, F: Acquire, Time: int64(2*k + j), Value: Value{Lock: "lock-0", LockValue: fmt.Sprintf("p%d-%d", k%7, k)}}
			b.Write(AppendJSON(nil, op))
			b.WriteByte('\n')
		}
	}
	good := b.Bytes()
	if len(good) < 3*chunkSize {
		t.Fatalf("%d bytes: not several chunks", len(good))
	}
	h, err := decodeBoth(t, good)
	if err != nil || len(h) != 2*sections || h[len(h)-1].Index != 2*sections-1 {
		t.Fatalf("whole history: %d ops, %v", len(h), err)
	}
	lines := bytes.SplitAfter(good, []byte("\n"))
	for _, bad := range []int{1, 7_001, 31_337, 2*sections - 1} { // 0-based line
		for _, how := range []string{"garbage", "index"} {
			broken := slices.Clone(lines)
			if how == "garbage" {
				broken[bad] = []byte("hello\n")
			} else {
				broken[bad] = bytes.Replace(broken[bad], []byte(`"index":`), []byte(`"index":9`), 1)
			}
			h, err := decodeBoth(t, bytes.Join(broken, nil))
			var le *LineError
			if !errors.As(err, &le) || le.Line != bad+1 || len(h) != bad {
				t.Errorf("%s at line %d: %d ops, %v", how, bad+1, len(h), err)
			}
		}
	}
	h, err = decodeBoth(t, good[:len(good)-5])
	var le *LineError
	if !errors.As(err, &le) || !errors.Is(err, ErrTruncated) || le.Line != 2*sections || len(h) != 2*sections-1 {
		t.Errorf("cut last line: %d ops, %v", len(h), err)
	}
}

// decodeBoth decodes content with Decode, from a reader, and with
// ReadFile, from a file, which take different paths; it fails t unless
// both return the same ops and the same error, and returns them.
func decodeBoth(t *testing.T, content []byte) (History, error) {
	t.Helper()
	h, err := Decode(bytes.NewReader(content))
	path := filepath.Join(t.TempDir(), "history.jsonl")
	if werr := os.WriteFile(path, content, 0o644); werr != nil {
		t.Fatal(werr)
	}
	fh, ferr := ReadFile(path)
	if want := fmt.Sprint(err); ferr == nil && err != nil || ferr != nil && !strings.HasSuffix(ferr.Error(), ": "+want) || err == nil && ferr != nil {
		t.Fatalf("Decode: %v; ReadFile: %v", err, ferr)
	}
	if !reflect.DeepEqual(h, fh) && (len(h) > 0 || len(fh) > 0) {
		t.Fatalf("Decode read %d ops, ReadFile %d, or they differ", len(h), len(fh))
	}
	// Scan gives the same ops, one at a time, and the same error.
	var sh History
	n, serr := Scan(context.Background(), path, func(op *Op) error {
		sh = append(sh, *op)
		return nil
	})
	if fmt.Sprint(serr) != fmt.Sprint(ferr) || n != len(sh) {
		t.Fatalf("Scan: %d ops, %v; ReadFile: %v", n, serr, ferr)
	}
	if !reflect.DeepEqual(sh, fh) && (len(sh) > 0 || len(fh) > 0) {
		t.Fatalf("Scan read %d ops, ReadFile %d, or they differ", len(sh), len(fh))
	}
	return h, err
}

// writeFile writes h with WriteFile to a new file in a temporary folder,
// failing t when it cannot, and returns the file's path.
func writeFile(t *testing.T, h History) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "history.jsonl")
	if err := WriteFile(path, h); err != nil {
		t.Fatal(err)
	}
	return path
}

// Scan stops at the first error its function returns, and returns it,
// having given it the ops before.
func TestScanStopsAtItsFunctionsError(t *testing.T) {
	h := History{
		{Index: 0, Type: Invoke, Process: 0, F: Acquire, Time: 10, Value: Value{Lock: "l"}},
		{Index: 1, Type: OK, Process: 0, F: Acquire, Time: 11, Value: Value{Lock: "l"}},
		{Index: 2, Type: Invoke, Process: 0, F: Release, Time: 12, Value: Value{Lock: "l"}},
	}
	path := writeFile(t, h)
	stop := errors.New("enough")
	var seen []int
	n, err := Scan(context.Background(), path, func(op *Op) error {
		seen = append(seen, op.Index)
		if op.Index == 1 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || n != 1 || !slices.Equal(seen, []int{0, 1}) {
		t.Errorf("Scan gave %v, counted %d, returned %v; want ops 0 and 1, 1 counted, the function's error", seen, n, err)
	}
	if _, err := Scan(context.Background(), filepath.Join(t.TempDir(), "none.jsonl"), func(*Op) error { return nil }); err == nil {
		t.Error("Scan of a missing file gave no error")
	}
}

// WriteFile writes what ReadFile reads back op for op, and says why it
// cannot write.
func TestWriteFileRoundTrip(t *testing.T) {
	h := History{
		{Index: 0, Type: Invoke, Process: 0, F: Acquire, Time: 10, Value: Value{Lock: "l"}},
		{Index: 1, Type: OK, Process: 0, F: Acquire, Time: 20, Value: Value{Lock: "l", Token: Tok(3), LockValue: "v", ValidUntil: 90}},
		{Index: 2, Type: Invoke, Process: NemesisProcess, F: "pause-client", Time: 25},
		{Index: 3, Type: Info, Process: NemesisProcess, F: "pause-client", Time: 30, Value: Value{Targets: []string{"p0"}}, Error: "timeout"},
	}
	path := writeFile(t, h)
	got, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, h) {
		t.Errorf("read back\n%v\nwant\n%v", got, h)
	}
	if err := WriteFile(filepath.Join(t.TempDir(), "no", "such", "dir", "h.jsonl"), h); err == nil {
		t.Error("WriteFile into a missing folder: no error")
	}
}
