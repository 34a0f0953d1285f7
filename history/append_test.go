package history

import (
	"encoding/json"
	"math/rand/v2"
	"testing"
)

// TestAppendJSONIsEncodingJSON compares AppendJSON with encoding/json on
// hand-picked ops and on random ones built from awkward pieces.
func TestAppendJSONIsEncodingJSON(t *testing.T) {
	ops := []Op{
		{},
		{Index: 3, Type: Invoke, Process: 2, F: Acquire, Time: 17, Value: Value{Lock: "lock-0"}},
		{Index: 4, Type: OK, Process: 2, F: Acquire, Time: 19, Value: Value{Lock: "lock-0", Token: Tok(0), LockValue: "v-1", ValidUntil: -5, Node: "n1"}},
		{Index: 5, Type: Info, Process: 2, F: Write, Time: 1 << 62, Value: Value{Lock: "l", N: Num(-1), StoreTime: 9}, Error: `context deadline exceeded <"x"> & \ é` + "\n\t\x00"},
		{Index: 6, Type: OK, Process: NemesisProcess, F: "isolate", Value: Value{Targets: []string{"n1", "p<3>"}, Duration: 5, Point: "after-acquire",
			Roles: map[string]string{"n2": "leader", "n1": "follower"}}},
		{Type: Fail, F: Release, Value: Value{Removed: "\u2028", Targets: []string{}}},
	}
	pieces := []string{"", "a", "lock-1", `"`, `\`, "<", "&", "é", "\x7f", "\x01", "\xff", "\u2029"}
	rng := rand.New(rand.NewPCG(1, 2))
	str := func() string {
		s := ""
		for range rng.IntN(4) {
			s += pieces[rng.IntN(len(pieces))]
		}
		return s
	}
	for range 2000 {
		op := Op{Index: rng.Int(), Type: Type(str()), Process: rng.IntN(100) - 50, F: str(), Time: rng.Int64() - rng.Int64(), Error: str(),
			Value: Value{Lock: str(), LockValue: str(), ValidUntil: rng.Int64N(3) - 1, StoreTime: rng.Int64N(3), Removed: str(), Node: str(), Point: str(), Duration: rng.Int64N(2)}}
		if rng.IntN(2) == 0 {
			op.Value.Token = Tok(rng.Uint64())
		}
		if rng.IntN(2) == 0 {
			op.Value.N = Num(rng.Int64())
		}
		if rng.IntN(3) == 0 {
			op.Value.Targets = []string{str(), str()}
		}
		ops = append(ops, op)
	}
	for _, op := range ops {
		want, err := json.Marshal(op)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendJSON(nil, op); string(got) != string(want) {
			t.Fatalf("AppendJSON\n%s\nencoding/json\n%s", got, want)
		}
	}
}

func BenchmarkAppendJSON(b *testing.B) {
	op := Op{Index: 123456, Type: OK, Process: 3, F: Acquire, Time: 1234567890, Value: Value{Lock: "lock-0", Token: Tok(77), LockValue: "p3-42", ValidUntil: 2234567890}}
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendJSON(buf[:0], op)
	}
}
