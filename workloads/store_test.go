package workloads

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/locktest/locktest/history"
)

func TestStoreModes(t *testing.T) {
	tok := history.Tok
	type step struct {
		req     StoreRequest
		ok      bool
		n       int64
		errText string
	}
	w := func(n int64, token *uint64, lv string) StoreRequest {
		return StoreRequest{F: history.Write, Lock: "l", N: n, Token: token, LockValue: lv}
	}
	tests := []struct {
		mode  Mode
		steps []step
	}{
		{ModeNone, []step{
			{w(1, tok(5), "a"), true, 1, ""},
			{w(1, tok(3), "b"), true, 1, ""}, // a stale write is accepted
			{StoreRequest{F: history.Read, Lock: "l"}, true, 1, ""},
			{StoreRequest{F: history.Read, Lock: "other"}, true, 0, ""},
		}},
		{ModeFenced, []step{
			{w(1, tok(5), "a"), true, 1, ""},
			{w(2, tok(5), "a"), true, 2, ""}, // the same holder writes again
			{w(3, tok(4), "b"), false, 2, "rejected: token 4 < 5"},
			{w(3, nil, "c"), false, 2, "rejected: no fencing token"},
			{w(3, tok(6), "d"), true, 3, ""},
			{w(1, tok(1), "e"), false, 3, "rejected: token 1 < 6"},
		}},
		{ModeCheckAndSet, []step{
			{w(1, nil, "a"), false, 0, `rejected: claimant is "", not "a"`},
			{StoreRequest{F: history.Claim, Lock: "l", LockValue: "a"}, true, 0, ""},
			{w(1, nil, "a"), true, 1, ""},
			{StoreRequest{F: history.Claim, Lock: "l", LockValue: "b"}, true, 1, ""},
			{w(2, nil, "a"), false, 1, "claimant is"},
			{w(2, nil, "b"), true, 2, ""},
		}},
	}
	for _, tt := range tests {
		t.Run(string(tt.mode), func(t *testing.T) {
			logPath := filepath.Join(t.TempDir(), "resource.jsonl")
			s, err := StartStore(tt.mode, history.StartClock(), logPath, nil)
			if err != nil {
				t.Fatal(err)
			}
			c, err := DialStore(context.Background(), s.Addr())
			if err != nil {
				t.Fatal(err)
			}
			for i, st := range tt.steps {
				rep, err := c.Do(context.Background(), st.req)
				if err != nil {
					t.Fatal(err)
				}
				if rep.OK != st.ok || rep.N != st.n || !strings.Contains(rep.Error, st.errText) || rep.Time <= 0 {
					t.Errorf("step %d %+v: got %+v, want ok=%v n=%d err~%q", i, st.req, rep, st.ok, st.n, st.errText)
				}
			}
			c.Close()
			if err := s.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(logPath)
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSpace(string(b)), "\n")
			if len(lines) != len(tt.steps) {
				t.Fatalf("store logged %d requests, want %d", len(lines), len(tt.steps))
			}
			var e StoreEntry
			if err := json.Unmarshal([]byte(lines[0]), &e); err != nil || e.F != tt.steps[0].req.F || e.Reply.OK != tt.steps[0].ok {
				t.Fatalf("first log entry %q: %+v %v", lines[0], e, err)
			}
		})
	}
}

func TestParseMode(t *testing.T) {
	for _, s := range []string{"none", "fenced", "check-and-set"} {
		if _, err := ParseMode(s); err != nil {
			t.Errorf("%s: %v", s, err)
		}
	}
	if _, err := ParseMode("fencing"); err == nil || !strings.Contains(err.Error(), "fencing") {
		t.Errorf("bad mode accepted or error unclear: %v", err)
	}
}
