package nemesis

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// positive refuses duration settings of which one is not positive, naming
// them ("fault window", "delay and fault window") and their values in the
// error.
func positive(what string, ds ...time.Duration) error {
	if !slices.ContainsFunc(ds, func(d time.Duration) bool { return d <= 0 }) {
		return nil
	}
	got := make([]string, len(ds))
	for i, d := range ds {
		got[i] = d.String()
	}
	return fmt.Errorf("%s must be positive, got %s", what, strings.Join(got, " and "))
}

// clockEnv checks the settings of the faults that move a clock, a node's
// or a worker's: a jump and a window to keep it for.
func clockEnv(env Env) error {
	if env.ClockBump == 0 || env.Window <= 0 {
		return fmt.Errorf("clock bump must be non-zero and the fault window positive, got %v and %v", env.ClockBump, env.Window)
	}
	return nil
}

// faultSetting is one run setting a fault reads (Spec.Settings), bound to
// its Env field: get renders it as its flag takes it, for a fault of the
// given name; set parses a flag's text into it. The schedule records each
// fault's settings so (Plan), and a replay sets them back.
type faultSetting struct {
	get func(env Env, fault string) string
	set func(env *Env, s string) error
}

// faultSettings are the settings of Spec.Settings by flag name. A fault
// whose spec names a setting missing here cannot be planned; a test keeps
// the two in step.
var faultSettings = map[string]faultSetting{
	"pause":      durSetting(func(e *Env) *time.Duration { return &e.ClientPause }),
	"down":       durSetting(func(e *Env) *time.Duration { return &e.NodeDown }),
	"window":     durSetting(func(e *Env) *time.Duration { return &e.Window }),
	"clock-bump": durSetting(func(e *Env) *time.Duration { return &e.ClockBump }),
	"strobe":     durSetting(func(e *Env) *time.Duration { return &e.StrobeRate }),
	"delay":      durSetting(func(e *Env) *time.Duration { return &e.Delay }),
	"pause-point": {
		// kill-client reads its point from KillPoint; the run sets both
		// from --pause-point.
		get: func(e Env, fault string) string {
			if fault == "kill-client" {
				return e.KillPoint
			}
			return e.PausePoint
		},
		set: func(e *Env, s string) error { e.PausePoint, e.KillPoint = s, s; return nil },
	},
	"loss": {
		get: func(e Env, _ string) string { return strconv.FormatFloat(e.Loss, 'g', -1, 64) },
		set: func(e *Env, s string) error {
			x, err := strconv.ParseFloat(s, 64)
			if err != nil || !(x > 0 && x <= 1) {
				return fmt.Errorf("want a fraction in (0, 1], got %q", s)
			}
			e.Loss = x
			return nil
		},
	},
	"kill-holder": {
		get: func(e Env, _ string) string { return strconv.FormatBool(e.KillHolder) },
		set: func(e *Env, s string) error {
			b, err := strconv.ParseBool(s)
			if err != nil {
				return fmt.Errorf("want true or false, got %q", s)
			}
			e.KillHolder = b
			return nil
		},
	},
	"clock-direction": {
		get: func(e Env, _ string) string { return e.ClockDirection },
		set: func(e *Env, s string) error {
			if s != ClockEither && s != ClockForward && s != ClockBackward {
				return fmt.Errorf("want %s or %s, got %q", ClockForward, ClockBackward, s)
			}
			e.ClockDirection = s
			return nil
		},
	},
	"partition": {
		get: func(e Env, _ string) string { return FormatGroups(e.Groups) },
		set: func(e *Env, s string) error {
			g, err := ParseGroups(s)
			e.Groups = g
			return err
		},
	},
}

// durSetting binds a duration setting to its Env field.
func durSetting(field func(*Env) *time.Duration) faultSetting {
	return faultSetting{
		get: func(e Env, _ string) string { return field(&e).String() },
		set: func(e *Env, s string) error {
			d, err := time.ParseDuration(s)
			if err != nil {
				return fmt.Errorf("want a duration such as 1.5s, got %q", s)
			}
			*field(e) = d
			return nil
		},
	}
}

// settingsOf returns the settings the fault of spec reads, by flag name,
// as env has them.
func settingsOf(spec *Spec, env Env) map[string]string {
	if len(spec.Settings) == 0 {
		return nil
	}
	out := make(map[string]string, len(spec.Settings))
	for _, name := range spec.Settings {
		if fs, ok := faultSettings[name]; ok {
			out[name] = fs.get(env, spec.Name)
		}
	}
	return out
}

// ParseGroups reads an explicit partition, "n1,n2/n3,c0": groups separated
// by slashes, hosts by commas. It refuses an empty group and fewer than
// two groups.
func ParseGroups(s string) ([][]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out [][]string
	for _, g := range strings.Split(s, "/") {
		hosts := hostList(g)
		if len(hosts) == 0 {
			return nil, fmt.Errorf("empty group in %q", s)
		}
		out = append(out, hosts)
	}
	if len(out) < 2 {
		return nil, fmt.Errorf("%q has one group; a partition needs two or more, separated by /", s)
	}
	return out, nil
}

// hostList reads hosts separated by commas, skipping blanks: a group of
// ParseGroups, a side of a cut (parseCut).
func hostList(s string) []string {
	var out []string
	for _, h := range strings.Split(s, ",") {
		if h = strings.TrimSpace(h); h != "" {
			out = append(out, h)
		}
	}
	return out
}

// FormatGroups renders groups as ParseGroups reads them.
func FormatGroups(groups [][]string) string {
	parts := make([]string, len(groups))
	for i, g := range groups {
		parts[i] = strings.Join(g, ",")
	}
	return strings.Join(parts, "/")
}
