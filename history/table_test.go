package history

import (
	"fmt"
	"reflect"
	"testing"
	"unsafe"
)

// tableOps is a history with every field and shape a Table must keep: the
// common ops a rec holds, and those it keeps whole (a nemesis op's
// targets, duration, point and roles; an index other than the op's
// position; a valid_until beside a store_time; a process beyond 32 bits).
func tableOps() History {
	return History{
		{Index: 0, Type: Invoke, Process: 0, F: Acquire, Time: 10, Value: Value{Lock: "lock-0"}},
		{Index: 1, Type: OK, Process: 0, F: Acquire, Time: 20, Value: Value{Lock: "lock-0", Token: Tok(0), LockValue: "p0-1", ValidUntil: 90, Node: "n1"}},
		{Index: 2, Type: Invoke, Process: 0, F: Read, Time: 21, Value: Value{Lock: "lock-0"}},
		{Index: 3, Type: OK, Process: 0, F: Read, Time: 22, Value: Value{Lock: "lock-0", N: Num(-4), StoreTime: 21}},
		{Index: 4, Type: Invoke, Process: 0, F: Write, Time: 23, Value: Value{Lock: "lock-0", N: Num(5), Token: Tok(1 << 63)}},
		{Index: 5, Type: Fail, Process: 0, F: Write, Time: 24, Value: Value{StoreTime: 23}, Error: "rejected: token 1 < 2"},
		{Index: 6, Type: Invoke, Process: NemesisProcess, F: "pause-client", Time: 25, Value: Value{Duration: 2e9, Point: "after-acquire"}},
		{Index: 7, Type: OK, Process: NemesisProcess, F: "pause-client", Time: 26, Value: Value{Targets: []string{"p0"}}},
		{Index: 8, Type: OK, Process: NemesisProcess, F: "isolate", Time: 27, Value: Value{Targets: []string{"n1"}, Roles: map[string]string{"n1": "leader"}}},
		{Index: 9, Type: Invoke, Process: 1, F: Release, Time: 28, Value: Value{Lock: "lock-0", LockValue: "p0-1"}},
		{Index: 10, Type: OK, Process: 1, F: Release, Time: 29, Value: Value{Lock: "lock-0", Removed: "p0-1"}},
		{Index: 12, Type: Invoke, Process: 2, F: Acquire, Time: 30, Value: Value{Lock: "lock-1"}},
		{Index: 12, Type: Info, Process: 2, F: Acquire, Time: 31, Value: Value{Lock: "lock-1", ValidUntil: 50, StoreTime: 40}, Error: "worker exited"},
		{Index: 13, Type: Invoke, Process: 1 << 40, F: Claim, Time: 32},
		{Index: 14, Type: Notice, Process: 1, F: Lost, Time: 33, Value: Value{Lock: "lock-0", LockValue: "p1-2"}, Error: "session expired"},
	}
}

// A Table gives back every op as it was recorded, through At, its
// accessors and History, and pairs them as a History does.
func TestTableHoldsEveryOpAsRecorded(t *testing.T) {
	h := tableOps()
	tab := NewTable(h)
	if tab.Len() != len(h) {
		t.Fatalf("Len = %d, want %d", tab.Len(), len(h))
	}
	for i := range h {
		got, want := tab.At(i), h[i]
		if !reflect.DeepEqual(got, want) {
			t.Errorf("At(%d) = %v, want %v", i, got, want)
		}
		acc := []struct {
			name      string
			got, want any
		}{
			{"Time", tab.Time(i), want.Time}, {"Process", tab.Process(i), want.Process},
			{"F", tab.F(i), want.F}, {"Type", tab.Type(i), want.Type}, {"Index", tab.Index(i), want.Index},
			{"Lock", tab.Lock(i), want.Value.Lock}, {"LockValue", tab.LockValue(i), want.Value.LockValue},
			{"Removed", tab.Removed(i), want.Value.Removed}, {"Error", tab.Error(i), want.Error},
			{"Token", tab.Token(i), want.Value.Token}, {"N", tab.N(i), want.Value.N},
			{"ValidUntil", tab.ValidUntil(i), want.Value.ValidUntil}, {"StoreTime", tab.StoreTime(i), want.Value.StoreTime},
		}
		for _, a := range acc {
			if !reflect.DeepEqual(a.got, a.want) {
				t.Errorf("op %d: %s = %v, want %v", i, a.name, a.got, a.want)
			}
		}
	}
	back := tab.History()
	if !reflect.DeepEqual(back, h) {
		t.Errorf("History() = %v\nwant %v", back, h)
	}
	*back[1].Value.Token = 99 // History shares no memory with the table
	if *tab.Token(1) != 0 {
		t.Errorf("writing History()'s token changed the table's to %d", *tab.Token(1))
	}
	var want []int32
	for _, p := range h.Pair() {
		want = append(want, int32(p))
	}
	if got := tab.Pair(); !reflect.DeepEqual(got, want) {
		t.Errorf("Pair = %v, want %v", got, want)
	}
	var empty *Table
	if empty.Len() != 0 || len(empty.Pair()) != 0 || len(empty.History()) != 0 {
		t.Error("a nil Table is not an empty history")
	}
}

// A record stays a few dozen bytes: what lets a check hold hours of
// history (docs/performance.md, "Memory").
func TestTableRecordIs64Bytes(t *testing.T) {
	if n := unsafe.Sizeof(rec{}); n != 64 {
		t.Errorf("a Table record takes %d bytes, want 64", n)
	}
}

// ReadTable reads what Decode reads, with the file's strings shared across
// its chunks: a history of many chunks, many distinct lock values, and
// ops a record keeps whole, read back op for op.
func TestReadTableMatchesDecode(t *testing.T) {
	var h History
	for k := range 20_000 { // about 3 MB: several chunks
		p := k % 5
		lv := fmt.Sprintf("p%d-%d", p, k)
		h = append(h,
			Op{Type: Invoke, Process: p, F: Acquire, Time: int64(4 * k), Value: Value{Lock: fmt.Sprintf("lock-%d", k%3)}},
			Op{Type: OK, Process: p, F: Acquire, Time: int64(4*k + 1), Value: Value{Lock: fmt.Sprintf("lock-%d", k%3), LockValue: lv, Token: Tok(uint64(k)), ValidUntil: int64(4*k + 100)}},
			Op{Type: Invoke, Process: p, F: Release, Time: int64(4*k + 2), Value: Value{Lock: fmt.Sprintf("lock-%d", k%3), LockValue: lv}},
			Op{Type: OK, Process: p, F: Release, Time: int64(4*k + 3), Value: Value{Removed: lv}, Error: fmt.Sprintf("e%d", k%11)},
		)
		if k%1000 == 0 {
			h = append(h,
				Op{Type: Invoke, Process: NemesisProcess, F: "kill-client", Time: int64(4*k + 3)},
				Op{Type: Info, Process: NemesisProcess, F: "kill-client", Time: int64(4*k + 3), Value: Value{Targets: []string{fmt.Sprintf("p%d", p)}}})
		}
	}
	for i := range h {
		h[i].Index = i
	}
	path := writeFile(t, h)
	tab, err := ReadTable(path)
	if err != nil {
		t.Fatal(err)
	}
	if tab.Len() != len(h) {
		t.Fatalf("ReadTable: %d ops, want %d", tab.Len(), len(h))
	}
	for i := range h {
		if got := tab.At(i); !reflect.DeepEqual(got, h[i]) {
			t.Fatalf("op %d read as %v, want %v", i, got, h[i])
		}
	}
}
