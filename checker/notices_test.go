package checker

import (
	"context"
	"maps"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/locktest/locktest/history"
)

// TestHoldNotices reads the golden histories with lost-lock notices and
// checks what HoldNotices and NoticeStats make of them: which hold each
// notice is about, the takeover, the loss, the latency and the writes
// after the notice.
func TestHoldNotices(t *testing.T) {
	for _, tc := range []struct {
		file  string
		rows  []HoldNotice
		stats map[string]float64
	}{
		{
			// Told 1.999 s after p1's grant, after p0's own write.
			file: "notice-after-takeover.jsonl",
			rows: []HoldNotice{{
				Process: 0, Lock: "x", Value: "p0-0", Acquire: 1, Start: ms(10), TakenOver: 7, TakenOverAt: ms(1101), LostAt: ms(1101),
				Notice: 17, NoticeAt: ms(3100), Reason: "SUSPENDED: the connection dropped", Latency: ms(1999), HasLatency: true,
				// Two holders from p1's grant to p0's release, which
				// came before the notice.
				DualHolder: ms(1929),
			}},
			stats: map[string]float64{
				"notices": 1, "notices_about_no_hold": 0, "holds_overlapped": 1, "holds_overlapped_told": 1, "holds_told": 1,
				"writes_after_notice": 0, "notice_latency_p50_s": 1.999, "notice_latency_p99_s": 1.999, "notice_latency_max_s": 1.999,
				"dual_holder_p50_s": 1.929, "dual_holder_p99_s": 1.929, "dual_holder_max_s": 1.929,
			},
		},
		{
			// A session lock taken over during a cut: its holder is told
			// 399 ms after p1's grant and releases later; the notice
			// ends the dual-holder window.
			file: "notice-during-takeover.jsonl",
			rows: []HoldNotice{{
				Process: 0, Lock: "x", Value: "p0-0", Acquire: 1, Start: ms(10), TakenOver: 7, TakenOverAt: ms(1101), LostAt: ms(1101),
				Notice: 8, NoticeAt: ms(1500), Reason: "SUSPENDED: the connection dropped", Latency: ms(399), HasLatency: true,
				DualHolder: ms(399),
			}},
			stats: map[string]float64{
				"notices": 1, "notices_about_no_hold": 0, "holds_overlapped": 1, "holds_overlapped_told": 1, "holds_told": 1,
				"writes_after_notice": 0, "notice_latency_p50_s": 0.399, "notice_latency_p99_s": 0.399, "notice_latency_max_s": 0.399,
				"dual_holder_p50_s": 0.399, "dual_holder_p99_s": 0.399, "dual_holder_max_s": 0.399,
			},
		},
		{
			// Told, never taken over, no lease end: no latency. p1's
			// notice names no lease and comes after its hold ended.
			file: "notice-stop-writing.jsonl",
			rows: []HoldNotice{{
				Process: 0, Lock: "x", Value: "p0-0", Acquire: 1, Start: ms(10), TakenOver: -1,
				Notice: 6, NoticeAt: ms(700), Reason: "SUSPENDED: the connection dropped",
			}},
			stats: map[string]float64{
				"notices": 2, "notices_about_no_hold": 1, "holds_overlapped": 0, "holds_overlapped_told": 0, "holds_told": 1,
				"writes_after_notice": 0,
			},
		},
		{
			// Told 410 ms before the lease's end, by a notice that names
			// no lease; p0 writes after it.
			file: "notice-wrote-after.jsonl",
			rows: []HoldNotice{{
				Process: 0, Lock: "x", Value: "p0-1", Acquire: 1, Start: ms(10), TakenOver: -1, LostAt: ms(1010),
				Notice: 4, NoticeAt: ms(600), Reason: "Disconnected", Latency: -ms(410), HasLatency: true, WritesAfter: []int{5},
			}},
			stats: map[string]float64{
				"notices": 1, "notices_about_no_hold": 0, "holds_overlapped": 0, "holds_overlapped_told": 0, "holds_told": 1,
				"writes_after_notice": 1, "notice_latency_p50_s": -0.41, "notice_latency_p99_s": -0.41, "notice_latency_max_s": -0.41,
			},
		},
	} {
		t.Run(tc.file, func(t *testing.T) {
			h, err := history.ReadFile(filepath.Join("testdata", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			tab := history.NewTable(h)
			rows, err := HoldNotices(context.Background(), tab)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(rows, tc.rows) {
				t.Errorf("rows:\n got %+v\nwant %+v", rows, tc.rows)
			}
			// The liveness checker carries the statistics.
			r := Liveness{}.Check(context.Background(), tab)
			got := map[string]float64{}
			for k := range tc.stats {
				if x, ok := r.Stats[k]; ok {
					got[k] = x
				}
			}
			if !maps.EqualFunc(got, tc.stats, func(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }) {
				t.Errorf("liveness stats:\n got %v\nwant %v", got, tc.stats)
			}
			for _, k := range []string{"notice_latency_p50_s", "notice_latency_p99_s", "notice_latency_max_s", "dual_holder_p50_s", "dual_holder_p99_s", "dual_holder_max_s"} {
				if _, want := tc.stats[k]; !want {
					if _, has := r.Stats[k]; has {
						t.Errorf("liveness stats has %s without a hold both told and lost (or taken over)", k)
					}
				}
			}
			// So does the resource checker.
			rr := Resource{Mode: "none"}.Check(context.Background(), tab)
			if rr.Stats["notices"] != tc.stats["notices"] || rr.Stats["writes_after_notice"] != tc.stats["writes_after_notice"] {
				t.Errorf("resource stats: notices %v, writes_after_notice %v; want %v, %v",
					rr.Stats["notices"], rr.Stats["writes_after_notice"], tc.stats["notices"], tc.stats["writes_after_notice"])
			}
		})
	}
}

// TestNoticeStatsWithoutNotices checks that a history without notices
// gets no notice statistics: its client may be unable to tell.
func TestNoticeStatsWithoutNotices(t *testing.T) {
	h, err := history.ReadFile(filepath.Join("testdata", "overlapping-holders.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	r := Liveness{}.Check(context.Background(), history.NewTable(h))
	for _, k := range []string{"notices", "holds_overlapped", "notice_latency_p50_s"} {
		if _, ok := r.Stats[k]; ok {
			t.Errorf("stats has %s for a history without notices", k)
		}
	}
	if NoticeStats(nil, 0, 0) != nil {
		t.Error("NoticeStats without notices is not nil")
	}
}
