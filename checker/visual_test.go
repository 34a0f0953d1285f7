package checker

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/locktest/locktest/history"
)

// TestCheckVisual: the picture is of the check's own windows and agrees
// with its verdict — the first windows of a valid history, linearized; the
// window where a violation was found, not linearized, even when it is not
// among the first; nothing, with a reason, when the first window is too
// long for it.
func TestCheckVisual(t *testing.T) {
	read := func(name string) history.History {
		h, err := history.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	for _, tc := range []struct {
		name       string
		h          history.History
		window     int
		maxOps     int
		valid      Verdict
		linearized bool
		ops        int    // shown; -1: all
		note       string // part of it
	}{
		{"a killed holder, all shown", read("killed-holder.jsonl"), 1, 1000, Valid, true, -1, ""},
		{"a killed holder, the first windows", read("killed-holder.jsonl"), 1, 5, Valid, true, 5, "it shows the first 5 of the 11 acquire, release and death ops (3 of the 6 windows porcupine checked them in)"},
		{"a violation in a later window", read("violation-after-cuts.jsonl"), 1, 3, Invalid, false, 1, `it shows the 1 op of lock "x" from 0.033s to 0.050s, in which porcupine found no linearization`},
		{"a violation in the first windows", read("violation-after-cuts.jsonl"), 1, 1000, Invalid, false, -1, ""},
		{"a first window too long", read("always-waiting.jsonl"), 0, 5, Valid, false, 0, "the first window of the history has 19 acquire, release and death ops, more than the 5 porcupine's visualization is made for"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Linearizability{Model: MutexModel, WindowOps: tc.window}
			r, vis := c.CheckVisual(context.Background(), history.NewTable(tc.h), tc.maxOps)
			if r.Valid != tc.valid {
				t.Fatalf("verdict %s, want %s", r.Valid, tc.valid)
			}
			if want := c.Check(context.Background(), history.NewTable(tc.h)); want.Valid != r.Valid || len(want.Anomalies) != len(r.Anomalies) {
				t.Errorf("CheckVisual gives %s %v, Check %s %v", r.Valid, r.Anomalies, want.Valid, want.Anomalies)
			}
			ops := tc.ops
			if ops < 0 {
				ops = int(r.Stats["ops"])
			}
			if vis.Ops != ops || vis.Linearized() != tc.linearized || !strings.Contains(vis.Note, tc.note) || (tc.note == "" && vis.Note != "") {
				t.Errorf("picture of %d ops (want %d), linearized %v (want %v), note %q (want %q)", vis.Ops, ops, vis.Linearized(), tc.linearized, vis.Note, tc.note)
			}
			var page bytes.Buffer
			err := vis.WriteHTML(&page)
			if (err == nil) != (ops > 0) || (ops > 0 && !strings.Contains(page.String(), "acquire(x)")) {
				t.Errorf("WriteHTML: %v, %d bytes", err, page.Len())
			}
		})
	}
	if _, vis := mutexLin.CheckVisual(context.Background(), history.NewTable(read("killed-holder.jsonl")), 0); vis != nil {
		t.Errorf("maxOps 0 gives a picture %+v", vis)
	}
}
