package shrink

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"
)

// weakening is how the search weakens one fault setting (by the flag
// name a planned fault's Settings use): halving it, and, for a setting
// that says how long the fault stays, halving the fault's stay (Lasts)
// with it, since a replay heals a fault its Lasts after injecting it.
type weakening struct {
	stay bool
	// floor is the least the setting is halved to, in its own unit
	// (nanoseconds or a fraction).
	floor float64
}

// weakened are the settings the search halves. Every other setting a
// fault reads is in notWeakened, with the reason; a test keeps the two
// lists and the faults' settings in step.
var weakened = map[string]weakening{
	"pause":      {stay: true, floor: float64(10 * time.Millisecond)},
	"down":       {stay: true, floor: float64(10 * time.Millisecond)},
	"window":     {stay: true, floor: float64(10 * time.Millisecond)},
	"clock-bump": {floor: float64(time.Millisecond)},
	"delay":      {floor: float64(time.Millisecond)},
	"loss":       {floor: 0.01},
	"sync-delay": {floor: float64(time.Millisecond)},
}

// notWeakened are the fault settings the search leaves as they are, and
// why.
var notWeakened = map[string]string{
	"pause-point":     "a place, not a size",
	"clock-direction": "a direction, not a size",
	"kill-holder":     "which worker a kill hits, not how hard",
	"strobe":          "a faster or slower strobe is not a weaker one",
	"clock-rate":      "a rate is weaker nearer 1, which halving does not move it towards (0.5 would become 0.25)",
	"partition":       "the groups of a partition; a replay has its cuts, which the search drops one at a time",
}

// Weakenings returns the candidates that each weaken one fault of c by one
// step: first the ones that hit less (a fault at a pause point pinned to
// the one worker it hit; one pin fewer; one cut fewer), then the ones
// that hit softer (a setting of weakened halved, down to its floor).
func Weakenings(c Candidate) []Candidate {
	var out []Candidate
	for i, f := range c.Plan.Faults {
		name := fmt.Sprintf("fault %d (%s at %s)", i+1, f.Fault, f.At)
		if len(f.Pins) > 1 && len(f.Hit) == 1 && slices.Contains(f.Pins, f.Hit[0]) {
			p := clone(c.Plan)
			p.Faults[i].Pins = []string{f.Hit[0]}
			out = append(out, Candidate{Plan: p, Change: fmt.Sprintf("%s: only %s, the one it hit", name, f.Hit[0])})
		}
		if len(f.Pins) > 1 {
			for j := range f.Pins {
				p := clone(c.Plan)
				p.Faults[i].Pins = slices.Delete(p.Faults[i].Pins, j, j+1)
				out = append(out, Candidate{Plan: p, Change: fmt.Sprintf("%s: not %s", name, f.Pins[j])})
			}
		}
		if len(f.Cuts) > 1 {
			for j := range f.Cuts {
				p := clone(c.Plan)
				p.Faults[i].Cuts = slices.Delete(p.Faults[i].Cuts, j, j+1)
				out = append(out, Candidate{Plan: p, Change: fmt.Sprintf("%s: without the cut %s", name, f.Cuts[j])})
			}
		}
	}
	for i, f := range c.Plan.Faults {
		name := fmt.Sprintf("fault %d (%s at %s)", i+1, f.Fault, f.At)
		for _, s := range slices.Sorted(maps.Keys(f.Settings)) {
			w, ok := weakened[s]
			if !ok {
				continue
			}
			half, ok := halve(f.Settings[s], s == "loss", w.floor)
			if !ok {
				continue
			}
			p := clone(c.Plan)
			p.Faults[i].Settings[s] = half
			change := fmt.Sprintf("%s: %s %s → %s", name, s, f.Settings[s], half)
			if w.stay && f.Lasts > 0 {
				// The stay shrinks as the setting did (by half, or to
				// its floor).
				p.Faults[i].Lasts = time.Duration(float64(f.Lasts) * ratio(f.Settings[s], half)).Round(time.Millisecond)
				change += fmt.Sprintf(", stays %s", p.Faults[i].Lasts)
			}
			out = append(out, Candidate{Plan: p, Change: change})
		}
	}
	return out
}

// halve halves a setting's value, a duration or (fraction) a number, to
// no less than floor; ok is false when the value does not parse or is at
// its floor already.
func halve(v string, fraction bool, floor float64) (string, bool) {
	if fraction {
		x, err := strconv.ParseFloat(v, 64)
		if err != nil || x <= floor {
			return v, false
		}
		return strconv.FormatFloat(max(x/2, floor), 'g', 3, 64), true
	}
	d, err := time.ParseDuration(v)
	if err != nil || float64(d) <= floor {
		return v, false
	}
	return max(d/2, time.Duration(floor)).Round(time.Millisecond).String(), true
}

// ratio is to/from for two durations, 0.5 when they do not parse.
func ratio(from, to string) float64 {
	a, errA := time.ParseDuration(from)
	b, errB := time.ParseDuration(to)
	if errA != nil || errB != nil || a == 0 {
		return 0.5
	}
	return float64(b) / float64(a)
}
