package history

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestRecorderRefusesMalformedSequences(t *testing.T) {
	tests := []struct {
		name string
		ops  []Op
		want error // of the last op; every earlier op must be accepted
	}{
		{"invoke then ok", []Op{{Type: Invoke, Process: 1, F: Acquire}, {Type: OK, Process: 1, F: Acquire}}, nil},
		{"double invoke", []Op{{Type: Invoke, Process: 1, F: Acquire}, {Type: Invoke, Process: 1, F: Read}}, ErrDoubleInvoke},
		{"completion without invoke", []Op{{Type: OK, Process: 2, F: Acquire}}, ErrNoInvoke},
		{"completion of another f", []Op{{Type: Invoke, Process: 1, F: Acquire}, {Type: OK, Process: 1, F: Release}}, ErrNoInvoke},
		{"completion of another process", []Op{{Type: Invoke, Process: 1, F: Acquire}, {Type: OK, Process: 2, F: Acquire}}, ErrNoInvoke},
		{"second completion", []Op{{Type: Invoke, Process: 1, F: Acquire}, {Type: Fail, Process: 1, F: Acquire}, {Type: OK, Process: 1, F: Acquire}}, ErrNoInvoke},
		{"nemesis interleaves", []Op{{Type: Invoke, Process: 1, F: Acquire}, {Type: Invoke, Process: NemesisProcess, F: "kill-node"}, {Type: Info, Process: 1, F: Acquire}}, nil},
		{"notice while an op is open", []Op{{Type: Invoke, Process: 1, F: Write}, {Type: Notice, Process: 1, F: Lost}, {Type: OK, Process: 1, F: Write}}, nil},
		{"notice alone", []Op{{Type: Notice, Process: 1, F: Lost}, {Type: Notice, Process: 1, F: Lost}}, nil},
		{"notice completes nothing", []Op{{Type: Invoke, Process: 1, F: Write}, {Type: Notice, Process: 1, F: Lost}, {Type: Invoke, Process: 1, F: Read}}, ErrDoubleInvoke},
		{"notice opens nothing", []Op{{Type: Notice, Process: 1, F: Lost}, {Type: OK, Process: 1, F: Lost}}, ErrNoInvoke},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewRecorder(nil)
			for i, op := range tt.ops {
				got, err := r.Record(op)
				if i < len(tt.ops)-1 {
					if err != nil {
						t.Fatalf("op %d refused: %v", i, err)
					}
					if got.Index != i {
						t.Fatalf("op %d got index %d", i, got.Index)
					}
					continue
				}
				if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
					t.Fatalf("last op: err %v, want %v", err, tt.want)
				}
			}
			if tt.want != nil && r.Len() != len(tt.ops)-1 {
				t.Fatalf("refused op was kept: len %d", r.Len())
			}
		})
	}
}

func TestRecorderIsSafeForConcurrentUse(t *testing.T) {
	r := NewRecorder(nil)
	var wg sync.WaitGroup
	for p := 0; p < 8; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 500; i++ {
				if _, err := r.Record(Op{Type: Invoke, Process: p, F: Acquire}); err != nil {
					t.Error(err)
				}
				if _, err := r.Record(Op{Type: OK, Process: p, F: Acquire}); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	h := r.History()
	if len(h) != 8000 {
		t.Fatalf("len %d, want 8000", len(h))
	}
	for i, o := range h {
		if o.Index != i {
			t.Fatalf("op %d has index %d", i, o.Index)
		}
	}
}

func writeHistory(t *testing.T, ops []Op) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "history.jsonl")
	w, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	r := NewRecorder(w)
	for _, op := range ops {
		if _, err := r.Record(op); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

var sample = []Op{
	{Type: Invoke, Process: 0, F: Acquire, Time: 10, Value: Value{Lock: "l"}},
	{Type: OK, Process: 0, F: Acquire, Time: 20, Value: Value{Lock: "l", Token: Tok(0), LockValue: "p0-1", ValidUntil: 1e9}},
	{Type: Invoke, Process: NemesisProcess, F: "pause-client", Time: 25},
	{Type: OK, Process: NemesisProcess, F: "pause-client", Time: 26, Value: Value{Targets: []string{"p0"}, Duration: 2e9, Point: "after-acquire"}},
	{Type: Invoke, Process: 0, F: Write, Time: 30, Value: Value{Lock: "l", N: Num(0), Token: Tok(0)}},
	{Type: Fail, Process: 0, F: Write, Time: 40, Value: Value{Lock: "l", N: Num(0)}, Error: "rejected: token 0 < 3"},
}

func TestWriterAndDecodeRoundTrip(t *testing.T) {
	path := writeHistory(t, sample)
	h, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != len(sample) {
		t.Fatalf("read %d ops, want %d", len(h), len(sample))
	}
	for i := range sample {
		want := sample[i]
		want.Index = i
		if h[i].String() != want.String() {
			t.Errorf("op %d:\n got %s\nwant %s", i, h[i], want)
		}
	}
	// A token of 0 must survive: ZooKeeper sequences start at 0.
	if h[1].Value.Token == nil || *h[1].Value.Token != 0 {
		t.Errorf("token 0 lost: %s", h[1])
	}
	if p := h.Pair(); p[0] != 1 || p[1] != 0 || p[2] != 3 || p[4] != 5 {
		t.Errorf("Pair = %v", p)
	}
}

func TestDecodeEmptyIsEmptyHistory(t *testing.T) {
	h, err := Decode(bytes.NewReader(nil))
	if err != nil || len(h) != 0 {
		t.Fatalf("h %v err %v", h, err)
	}
}

func TestClockIsSharedAndMonotonic(t *testing.T) {
	c := StartClock()
	d := ClockAt(c.Origin())
	a, b := c.Now(), d.Now()
	if a < 0 || b < a {
		t.Fatalf("clock went backwards: %v then %v", a, b)
	}
}

func TestWriterSyncsInTheBackgroundAndCloses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.jsonl")
	w, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	r := NewRecorder(w)
	if _, err := r.Record(sample[0]); err != nil {
		t.Fatal(err)
	}
	// Written at once, before any fsync or Close: a killed driver keeps it.
	b, err := os.ReadFile(path)
	if err != nil || !strings.HasSuffix(string(b), "\n") || strings.Count(string(b), "\n") != 1 {
		t.Fatalf("file after one op: %q, %v", b, err)
	}
	time.Sleep(2 * SyncEvery) // let the background loop fsync once
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := w.Append(sample[1]); !errors.Is(err, os.ErrClosed) {
		t.Errorf("Append after Close: %v, want os.ErrClosed", err)
	}
}

// TestClientSpanLeavesTheNemesisOut: the span runs from the first to the
// last client op, whatever the nemesis did before or after.
func TestClientSpanLeavesTheNemesisOut(t *testing.T) {
	h := History{
		{Process: NemesisProcess, Type: Invoke, F: "pause-client", Time: 1},
		{Process: 0, Type: Invoke, F: Acquire, Time: 10},
		{Process: 1, Type: OK, F: Release, Time: 40},
		{Process: NemesisProcess, Type: OK, F: "pause-client", Time: 99},
	}
	if got := h.ClientSpan(); got != 30 {
		t.Errorf("span %v, want 30ns", got)
	}
	if got := (History{}).ClientSpan(); got != 0 {
		t.Errorf("empty history: span %v, want 0", got)
	}
}
