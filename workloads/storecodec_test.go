package workloads

import (
	"encoding/json"
	"math"
	"reflect"
	"testing"

	"github.com/locktest/locktest/history"
)

// TestStoreCodecMatchesEncodingJSON checks that the hand-written encoders
// write what encoding/json writes, and that the decoders read back what
// encoding/json would, on the fast path or off it.
func TestStoreCodecMatchesEncodingJSON(t *testing.T) {
	reqs := []StoreRequest{
		{F: history.Read, Process: 3, Lock: "lock-0"},
		{F: history.Write, Process: 12, Lock: "lock-1", N: 41, Token: history.Tok(7), LockValue: "p12-8f3a"},
		{F: history.Write, Process: 0, Lock: "l", N: -5, Token: history.Tok(math.MaxUint64)},
		{F: history.Claim, Process: 1, Lock: "l", Token: history.Tok(0), LockValue: `a "quoted" <value> & é`},
		{F: "", Process: -1, Lock: ""},
	}
	for _, req := range reqs {
		want, _ := json.Marshal(req)
		if got := appendRequest(nil, req); string(got) != string(want) {
			t.Errorf("appendRequest(%+v)\n got %s\nwant %s", req, got, want)
		}
		var back StoreRequest
		if err := decodeRequest(append(want, '\n'), &back); err != nil || !reflect.DeepEqual(back, req) {
			t.Errorf("decodeRequest(%s) = %+v, %v; want %+v", want, back, err, req)
		}
		for _, rep := range []StoreReply{{OK: true, N: 42, Time: 123456789}, {N: -1, Time: 1, Error: "rejected: token 3 < 9"}, {Error: "claimant is \"x\"\n"}} {
			want, _ := json.Marshal(rep)
			if got := appendReply(nil, rep); string(got) != string(want) {
				t.Errorf("appendReply(%+v)\n got %s\nwant %s", rep, got, want)
			}
			var back StoreReply
			if err := decodeReply(want, &back); err != nil || back != rep {
				t.Errorf("decodeReply(%s) = %+v, %v; want %+v", want, back, err, rep)
			}
			want, _ = json.Marshal(StoreEntry{StoreRequest: req, Reply: rep})
			if got := appendEntry(nil, req, rep); string(got) != string(want) {
				t.Errorf("appendEntry\n got %s\nwant %s", got, want)
			}
		}
	}
}

// TestStoreDecodersTakeAnyJSON feeds the decoders lines the encoders never
// write: they must read them as encoding/json does, and refuse what it
// refuses.
func TestStoreDecodersTakeAnyJSON(t *testing.T) {
	for _, tc := range []struct {
		line string
		want StoreRequest
		bad  bool
	}{
		{line: `{"lock":"l","f":"read","process":2}`, want: StoreRequest{F: "read", Process: 2, Lock: "l"}},
		{line: ` {"f":"write", "process":2, "lock":"l", "n":3, "token":5}`, want: StoreRequest{F: "write", Process: 2, Lock: "l", N: 3, Token: history.Tok(5)}},
		{line: `{"f":"read","process":1,"lock":"a\u00e9","extra":true}`, want: StoreRequest{F: "read", Process: 1, Lock: "aé"}},
		{line: `{"f":"write","process":1,"lock":"l","token":-1}`, bad: true},
		{line: `{"f":"write","process":1.5}`, bad: true},
		{line: `{"f":"read"`, bad: true},
		{line: `not json`, bad: true},
	} {
		var got StoreRequest
		err := decodeRequest([]byte(tc.line), &got)
		switch {
		case tc.bad && err == nil:
			t.Errorf("decodeRequest(%s) = %+v, want an error", tc.line, got)
		case !tc.bad && (err != nil || !reflect.DeepEqual(got, tc.want)):
			t.Errorf("decodeRequest(%s) = %+v, %v; want %+v", tc.line, got, err, tc.want)
		}
	}
	var rep StoreReply
	if err := decodeReply([]byte(`{"time":5,"ok":true,"n":2}`), &rep); err != nil || rep != (StoreReply{OK: true, N: 2, Time: 5}) {
		t.Errorf("decodeReply of reordered keys = %+v, %v", rep, err)
	}
	if err := decodeReply([]byte(`{"ok":"yes"}`), &rep); err == nil {
		t.Errorf("decodeReply of a string ok = %+v, want an error", rep)
	}
}
