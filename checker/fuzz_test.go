package checker

import (
	"context"
	"testing"
	"time"

	"github.com/locktest/locktest/history"
)

// fuzzHistory turns arbitrary bytes into a well-formed history: four bytes
// per op choose the process (the nemesis included), what it does, the lock,
// how far time moves (possibly not at all) and the values it carries —
// tokens, valid_until before or after the op, counter values, store times,
// removed lock values, "worker exited" errors. Every process's open op is
// completed before it invokes again, and times never go back.
func fuzzHistory(data []byte) history.History {
	var h history.History
	open := map[int]int{} // process → its open invocation
	now := int64(0)
	fs := []string{history.Acquire, history.Release, history.Read, history.Write, history.Claim, "pause-client"}
	locks := []string{"a", "b", ""}
	for i := 0; i+3 < len(data); i += 4 {
		b0, b1, b2, b3 := data[i], data[i+1], data[i+2], data[i+3]
		now += int64(b3%8) * 1_000_000
		p := int(b0%6) - 1 // -1 is the nemesis
		op := history.Op{Index: len(h), Process: p, Time: now}
		v := history.Value{Lock: locks[int(b2)%len(locks)]}
		if b2&0x10 != 0 {
			v.Token = history.Tok(uint64(b2 >> 5))
		}
		if b1&0x20 != 0 {
			v.ValidUntil = now + int64(b3>>3)*1_000_000 - 8_000_000
		}
		if b1&0x40 != 0 {
			v.N = history.Num(int64(b2 % 5))
		}
		if b1&0x80 != 0 {
			v.StoreTime = now
		}
		if b2&0x08 != 0 {
			v.LockValue = locks[int(b3)%len(locks)]
			v.Removed = locks[int(b1)%len(locks)]
		}
		if inv, ok := open[p]; ok {
			op.F = h[inv].F
			if v.Lock == "" || b2&0x04 != 0 {
				v.Lock = h[inv].Value.Lock
			}
			op.Type = []history.Type{history.OK, history.Fail, history.Info}[b1%3]
			if b1%7 == 0 {
				op.Error = "worker exited"
			} else if op.Type == history.Fail && b1&1 != 0 {
				op.Error = "rejected: by the fuzzer"
			}
			delete(open, p)
		} else {
			op.Type = history.Invoke
			op.F = fs[int(b1)%len(fs)]
			if p < 0 && b1&1 != 0 {
				op.F = "kill-client"
				v.Targets = []string{"p" + string(rune('0'+b2%5))}
			}
			open[p] = len(h)
		}
		op.Value = v
		h = append(h, op)
	}
	return h
}

// plant appends to h a violation of what c checks, on lock "planted" by
// processes of their own after everything else, so that c must not say
// valid.
func plant(h history.History, c Checker) history.History {
	h = append(history.History(nil), h...)
	end := int64(0)
	for _, o := range h {
		end = max(end, o.Time)
	}
	add := func(typ history.Type, p int, f string, ms int64, v history.Value, e string) {
		v.Lock = "planted"
		h = append(h, history.Op{Index: len(h), Type: typ, Process: p, F: f, Time: end + ms*1_000_000, Value: v, Error: e})
	}
	switch c.(type) {
	case MutualExclusion, Linearizability:
		if l, ok := c.(Linearizability); ok && l.Model == RegisterModel {
			// A read of a value nobody wrote.
			add(history.Invoke, 100, history.Read, 1, history.Value{}, "")
			add(history.OK, 100, history.Read, 2, history.Value{N: history.Num(77)}, "")
			break
		}
		// Two session holds at once.
		add(history.Invoke, 100, history.Acquire, 1, history.Value{}, "")
		add(history.OK, 100, history.Acquire, 2, history.Value{}, "")
		add(history.Invoke, 101, history.Acquire, 3, history.Value{}, "")
		add(history.OK, 101, history.Acquire, 4, history.Value{}, "")
	case Resource:
		// A write accepted from a process that never acquired.
		add(history.Invoke, 100, history.Write, 1, history.Value{N: history.Num(1)}, "")
		add(history.OK, 100, history.Write, 2, history.Value{N: history.Num(1), StoreTime: end + 2_000_000}, "")
	case FencingTokens:
		// A token granted twice.
		for p := 100; p < 102; p++ {
			add(history.Invoke, p, history.Acquire, int64(p), history.Value{}, "")
			add(history.OK, p, history.Acquire, int64(p)+1, history.Value{Token: history.Tok(9)}, "")
		}
	case Liveness:
		// A session holder dies; others fail for a minute.
		add(history.Invoke, 100, history.Acquire, 1, history.Value{}, "")
		add(history.OK, 100, history.Acquire, 2, history.Value{}, "")
		add(history.Invoke, 100, history.Read, 3, history.Value{}, "")
		add(history.Info, 100, history.Read, 4, history.Value{}, "worker exited")
		for k := range int64(6) {
			add(history.Invoke, 101, history.Acquire, 1000+10_000*k, history.Value{}, "")
			add(history.Fail, 101, history.Acquire, 1100+10_000*k, history.Value{}, "not acquired")
		}
	}
	return h
}

// fuzzChecker checks that c never panics on a fuzzed history and never
// says valid once a violation is planted in it.
func fuzzChecker(f *testing.F, c Checker) {
	f.Add([]byte{}, false)
	f.Add([]byte{1, 0, 0, 1, 1, 0, 0, 2, 2, 0, 0, 3, 2, 0, 0, 4}, true)
	f.Add([]byte("the quick brown fox jumps over the lazy dog, twice: the quick brown fox"), true)
	f.Add([]byte{5, 3, 0x19, 9, 5, 0x40, 0x19, 1, 0, 0xe3, 0x3f, 255, 0, 0x80, 2, 3}, false)
	f.Fuzz(func(t *testing.T, data []byte, planted bool) {
		h := fuzzHistory(data)
		if planted {
			h = plant(h, c)
		}
		r := c.Check(context.Background(), history.NewTable(h)) // a panic fails the fuzz target
		if planted && r.Valid == Valid {
			t.Fatalf("%s says valid with a planted violation: %+v\n%s", c.Name(), r, render(h))
		}
		if r.Valid == "" || r.Anomalies == nil {
			t.Fatalf("%s: incomplete result %+v", c.Name(), r)
		}
		for _, a := range r.Anomalies {
			for _, i := range a.Ops {
				if i < 0 || i >= len(h) {
					t.Fatalf("%s: anomaly %s names op %d of %d", c.Name(), a.Kind, i, len(h))
				}
			}
		}
	})
}

func FuzzMutualExclusion(f *testing.F) { fuzzChecker(f, MutualExclusion{}) }
func FuzzResource(f *testing.F)        { fuzzChecker(f, Resource{}) }
func FuzzFencingTokens(f *testing.F)   { fuzzChecker(f, FencingTokens{}) }
func FuzzLiveness(f *testing.F)        { fuzzChecker(f, Liveness{}) }
func FuzzLinearizableMutex(f *testing.F) {
	fuzzChecker(f, Linearizability{Model: MutexModel, Timeout: 5 * time.Second, WindowOps: 8})
}
func FuzzLinearizableRegister(f *testing.F) {
	fuzzChecker(f, Linearizability{Model: RegisterModel, Timeout: 5 * time.Second, WindowOps: 8})
}

func TestFuzzHistoriesAreWellFormed(t *testing.T) {
	for _, s := range []string{"", "abcd", "the quick brown fox jumps over the lazy dog, twice: the quick brown fox"} {
		if h := fuzzHistory([]byte(s)); !wellFormed(h) {
			t.Errorf("fuzzHistory(%q) is malformed:%s", s, render(h))
		}
	}
}
