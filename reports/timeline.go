package reports

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/history"
)

// The timeline's model: what the lease timeline of a report draws, with
// times in µs since the history's start. It is embedded in the page as
// JSON (the JavaScript redraws from it when zooming) and drawn once in Go
// as the static SVG that shows without JavaScript. Arrays of numbers keep
// it small: a 10-minute run at 16 clients has about 100,000 holds.

// Hold flags.
const (
	holdReleased  = 1 << iota // ended by the holder's release invocation
	holdNoRelease             // the release never came: ends at valid_until or the end
	holdAnomaly               // its acquire ok is named by an anomaly
)

// Write kinds.
const (
	writeAccepted = iota
	writeRejected // refused by the store: fencing (or the check-and-set claim) saved it
	writeFailed   // never reached the store
	writeUnknown  // info, or never completed
)

// tlHold is one hold, as [lane, start, solidEnd, end, token, flags, okIdx,
// releaseIdx, lock]: the bar is solid from start to solidEnd (the lease as
// the holder believed it) and pale from solidEnd to end (held past its
// valid_until); token and releaseIdx are -1 where there is none.
type tlHold [9]int64

// tlWrite is one write, as [lane, time, kind, idx]: the store time of a
// write the store answered, else the invocation's time.
type tlWrite [4]int64

// tlFault is one fault window: from an injection's completion to its
// heal's completion (or the end of the history).
type tlFault struct {
	Start   int64  `json:"s"`
	End     int64  `json:"e"`
	Name    string `json:"f"`
	Targets string `json:"t"`
	Inject  int    `json:"i"`
	Heal    int    `json:"h"` // -1 when it was never healed
	// Procs are the lanes of the processes it paused or killed.
	Lanes []int `json:"l,omitempty"`
}

// tlAnomaly is one anomaly with the points of the ops that prove it.
type tlAnomaly struct {
	ID          string     `json:"id"`
	Checker     string     `json:"c"`
	Kind        string     `json:"k"`
	Explanation string     `json:"x"`
	Ops         []int      `json:"o"`
	Points      [][2]int64 `json:"p"` // [lane, time] per op in the history
}

// timeline is the whole model.
type timeline struct {
	End    int64     `json:"end"`
	Lanes  []string  `json:"lanes"` // lane 0 is the nemesis
	Locks  []string  `json:"locks"`
	Holds  []tlHold  `json:"holds"`
	Writes []tlWrite `json:"writes"`
	// Notices are the lost-lock notices as [lane, time, idx], in time
	// order: a holder's client said its lease is lost.
	Notices [][3]int64  `json:"notices"`
	Faults  []tlFault   `json:"faults"`
	Anoms   []tlAnomaly `json:"anomalies"`
	// Ops are the full records shown on hover, by history index: every op
	// when the history has at most fullOpsLimit ops, else only those that
	// anomalies name and the nemesis's.
	Ops map[int]string `json:"ops"`
	// AllOps says whether Ops holds every op.
	AllOps bool `json:"all"`
}

// fullOpsLimit is the largest history whose every op record is embedded.
const fullOpsLimit = 20_000

var procTarget = regexp.MustCompile(`^p(\d+)`)

func us(ns int64) int64 { return ns / 1000 }

// buildTimeline computes the timeline of h with the anomalies of rs.
func buildTimeline(rs []checker.Result, h *history.Table) *timeline {
	t := &timeline{Lanes: []string{"nemesis"}, Holds: []tlHold{}, Writes: []tlWrite{}, Notices: [][3]int64{}, Faults: []tlFault{},
		Anoms: []tlAnomaly{}, Ops: map[int]string{}, Locks: []string{}}
	var end int64
	procs := map[int]bool{}
	for i := range h.Len() {
		end = max(end, h.Time(i))
		if h.Process(i) >= 0 {
			procs[h.Process(i)] = true
		}
	}
	t.End = us(end)
	ps := make([]int, 0, len(procs))
	for p := range procs {
		ps = append(ps, p)
	}
	slices.Sort(ps)
	lane := map[int]int{history.NemesisProcess: 0}
	for i, p := range ps {
		lane[p] = i + 1
		t.Lanes = append(t.Lanes, fmt.Sprintf("p%d", p))
	}
	laneOf := func(p int) int {
		if l, ok := lane[p]; ok {
			return l
		}
		return 0
	}
	lockID := map[string]int{}
	lockOf := func(name string) int64 {
		id, ok := lockID[name]
		if !ok {
			id = len(t.Locks)
			lockID[name] = id
			t.Locks = append(t.Locks, name)
		}
		return int64(id)
	}

	// Anomaly ops, to flag their holds.
	named := map[int]bool{}
	for _, r := range rs {
		for _, a := range r.Anomalies {
			for _, i := range a.Ops {
				named[i] = true
			}
		}
	}

	type key struct {
		proc int
		lock string
	}
	open := map[key]int{} // the hold not yet ended, by position in t.Holds
	closeHold := func(k key, at int64, rel int) {
		i, ok := open[k]
		if !ok {
			return
		}
		delete(open, k)
		hd := &t.Holds[i]
		hd[3] = max(us(at), hd[1])
		hd[7] = int64(rel)
		if rel >= 0 {
			hd[5] |= holdReleased
		}
		if hd[2] < 0 || hd[2] > hd[3] {
			hd[2] = hd[3]
		}
	}
	pair := h.Pair()
	var window *tlFault
	for i := range h.Len() {
		o := h.At(i)
		if o.Process < 0 {
			if o.Type == history.Invoke {
				continue
			}
			switch {
			case window != nil && o.F != window.Name:
				window.End, window.Heal = us(o.Time), i
				t.Faults = append(t.Faults, *window)
				window = nil
			case window == nil && !history.IsHeal(o.F) && (o.Type == history.OK || o.Type == history.Info):
				window = &tlFault{Start: us(o.Time), Name: o.F, Targets: strings.Join(o.Value.Targets, " "), Inject: i, Heal: -1}
				for _, tg := range o.Value.Targets { // a worker it hit ("p3", "p2-2s") marks that worker's lane
					if m := procTarget.FindStringSubmatch(tg); m != nil {
						if p, err := strconv.Atoi(m[1]); err == nil {
							if l, ok := lane[p]; ok {
								window.Lanes = append(window.Lanes, l)
							}
						}
					}
				}
			}
			continue
		}
		if o.Type == history.Notice {
			t.Notices = append(t.Notices, [3]int64{int64(laneOf(o.Process)), us(o.Time), int64(i)})
			continue
		}
		k := key{o.Process, o.Value.Lock}
		switch {
		case o.F == history.Acquire && o.Type == history.Invoke:
			closeHold(k, o.Time, -1)
		case o.F == history.Acquire && o.Type == history.OK:
			closeHold(k, o.Time, -1)
			tok := int64(-1)
			if o.Value.Token != nil {
				tok = int64(*o.Value.Token)
			}
			solid := int64(-1)
			if o.Value.ValidUntil != 0 {
				solid = max(us(o.Value.ValidUntil), us(o.Time))
			}
			var flags int64
			if named[i] {
				flags |= holdAnomaly
			}
			open[k] = len(t.Holds)
			t.Holds = append(t.Holds, tlHold{int64(laneOf(o.Process)), us(o.Time), solid, -1, tok, flags, int64(i), -1, lockOf(o.Value.Lock)})
		case o.F == history.Release && o.Type == history.Invoke:
			closeHold(k, o.Time, i)
		case o.F == history.Write && o.Type == history.Invoke:
			w := tlWrite{int64(laneOf(o.Process)), us(o.Time), writeUnknown, int64(i)}
			if c := pair[i]; c >= 0 {
				co := h.At(int(c))
				w[3] = int64(c)
				switch {
				case co.Type == history.OK:
					w[2] = writeAccepted
				case co.Type == history.Fail && (co.Value.StoreTime != 0 || strings.HasPrefix(co.Error, "rejected")):
					w[2] = writeRejected
				case co.Type == history.Fail:
					w[2] = writeFailed
				}
				if co.Value.StoreTime != 0 {
					w[1] = us(co.Value.StoreTime)
				}
			}
			t.Writes = append(t.Writes, w)
		}
	}
	if window != nil {
		window.End = t.End
		t.Faults = append(t.Faults, *window)
	}
	// Holds whose release never came end at their valid_until, or at the
	// end of the history when they have none.
	for k, i := range open {
		hd := &t.Holds[i]
		_ = k
		hd[5] |= holdNoRelease
		if hd[2] >= 0 {
			hd[3] = hd[2]
		} else {
			hd[3], hd[2] = max(t.End, hd[1]), max(t.End, hd[1])
		}
	}
	slices.SortStableFunc(t.Writes, func(a, b tlWrite) int { return int(a[1] - b[1]) })
	slices.SortStableFunc(t.Notices, func(a, b [3]int64) int { return int(a[1] - b[1]) })

	shownAnomalies(rs, func(a checker.Anomaly, chk, id string) {
		ta := tlAnomaly{ID: id, Checker: chk, Kind: a.Kind, Explanation: a.Explanation,
			Ops: a.Ops, Points: [][2]int64{}}
		if ta.Ops == nil {
			ta.Ops = []int{}
		}
		for _, i := range a.Ops {
			if i >= 0 && i < h.Len() {
				ta.Points = append(ta.Points, [2]int64{int64(laneOf(h.Process(i))), us(h.Time(i))})
				t.Ops[i] = h.At(i).String()
			}
		}
		t.Anoms = append(t.Anoms, ta)
	})
	t.AllOps = h.Len() <= fullOpsLimit
	for i := range h.Len() {
		if t.AllOps || h.Process(i) < 0 {
			t.Ops[i] = h.At(i).String()
		}
	}
	return t
}
