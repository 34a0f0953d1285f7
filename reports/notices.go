package reports

import (
	"context"
	"fmt"
	"strconv"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/runstore"
)

// noticeRowsShown is how many holds the report's table of lost-lock
// notices lists; results.json keeps the statistics of them all.
const noticeRowsShown = 50

// noticeSection is the report's section on lost-lock notices: for every
// hold that another client overlapped, and every hold whose holder was
// told, whether the holder was told, how late, and whether it wrote after.
type noticeSection struct {
	// Source says what tells this client's holders (RunInfo.Notices).
	Source string
	// Notices is how many notices the history holds.
	Notices int
	// Summary is one sentence over every row.
	Summary string
	Rows    []noticeRow
	// More is how many rows are not shown.
	More int
}

// noticeRow is one hold of the table, its times as text.
type noticeRow struct {
	Process   int
	Lock      string
	Acquired  string
	TakenOver string
	LostAt    string
	Told      string
	Latency   string
	// DualHolder is the dual-holder window of a hold taken over
	// (checker.HoldNotice.DualHolder), "—" for the others.
	DualHolder string
	Reason     string
	Wrote      string
	// Late is set when the holder was told after it lost the lock, or
	// never; Wrote is not empty when it wrote after it was told.
	Late bool
}

// buildNotices returns the notice section of run's report, or nil when the
// client sends no notices and the history holds none.
func buildNotices(run runstore.RunInfo, h *history.Table) *noticeSection {
	notices := 0
	for i := range h.Len() {
		if h.Type(i) == history.Notice && h.F(i) == history.Lost && h.Process(i) >= 0 {
			notices++
		}
	}
	if notices == 0 && run.Notices == "" {
		return nil
	}
	rows, err := checker.HoldNotices(context.Background(), h)
	if err != nil {
		return nil
	}
	s := &noticeSection{Source: run.Notices, Notices: notices}
	late := 0
	for _, r := range rows {
		row := noticeRow{Process: r.Process, Lock: r.Lock, Acquired: secsText(r.Start), TakenOver: "—", LostAt: "—", Told: "never", Latency: "—", DualHolder: "—", Reason: r.Reason}
		if r.Overlapped() {
			row.TakenOver = "op " + strconv.Itoa(r.TakenOver)
			row.DualHolder = secsText(r.DualHolder)
		}
		if r.LostAt != 0 {
			row.LostAt = secsText(r.LostAt)
		}
		switch {
		case r.Told():
			row.Told = secsText(r.NoticeAt)
			if r.HasLatency {
				row.Latency = fmt.Sprintf("%+.3f s", float64(r.Latency)/1e9)
				row.Late = r.Latency > 0
			}
		case r.Overlapped():
			row.Late = true
		}
		if r.Latency > 0 && r.HasLatency {
			late++
		}
		if n := len(r.WritesAfter); n > 0 {
			row.Wrote = fmt.Sprintf("%d write(s), first op %d", n, r.WritesAfter[0])
		}
		if len(s.Rows) < noticeRowsShown {
			s.Rows = append(s.Rows, row)
		} else {
			s.More++
		}
	}
	st := checker.NoticeStats(rows, notices, 0)
	s.Summary = fmt.Sprintf("%d notices; %v of %v holds that another client overlapped were told, %d told only after the loss; %v writes after being told.",
		notices, st["holds_overlapped_told"], st["holds_overlapped"], late, st["writes_after_notice"])
	if mx, ok := st["dual_holder_max_s"]; ok {
		s.Summary += fmt.Sprintf(" Two clients acted as holders for up to %.3f s after a takeover (median %.3f s).", mx, st["dual_holder_p50_s"])
	}
	return s
}

// secsText is a history time as seconds since the start.
func secsText(ns int64) string { return strconv.FormatFloat(float64(ns)/1e9, 'f', 3, 64) + " s" }
