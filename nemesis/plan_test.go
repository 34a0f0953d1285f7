package nemesis

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/testkit/faultops"
)

// planEnv returns an environment over fakes in which every fault of
// planFaults can be applied, with the magnitudes given.
func planEnv(window, pause, bump time.Duration) (Env, *liveCluster, *fakeNet) {
	c := newLiveCluster("n1", "n2", "n3")
	net := &fakeNet{}
	return Env{
		Cluster: c, Clients: &fakeClients{procs: []int{0, 1, 2}}, Net: net, ClientHosts: []string{"c0", "c1", "c2"},
		Clocks: &fakeClocks{}}.With(Window.Is(window), Pause.Is(pause), Down.Is(time.Millisecond), ClockBump.Is(bump)), c, net
}

// planFaults are faults of every kind a plan records: a node, a worker,
// cuts, a clock jump with its drawn direction, and a combined fault.
var planFaults = []string{"kill-node", "pause-client", "isolate", "halves", "client-isolate", "clock-bump", "kill-node+isolate"}

// A seeded schedule's plan, written and read back, replays the same
// injections with the same targets, settings and directions, in a run
// whose own settings differ: the plan's are the ones used.
func TestPlanReplaysTheSameFaults(t *testing.T) {
	env, _, _ := planEnv(15*time.Millisecond, 10*time.Millisecond, time.Second)
	faults, err := Build(planFaults, env)
	if err != nil {
		t.Fatal(err)
	}
	s := newSchedule(10*time.Millisecond, 7, faults...)
	ctx, cancel := context.WithTimeout(context.Background(), 800*time.Millisecond)
	defer cancel()
	if err := s.Run(ctx); err != nil {
		t.Fatal(err)
	}
	planned := s.Planned()
	wantInj, wantHeals := faultops.Lines(s.Recorder.History())
	if len(planned) < 5 || len(planned) != len(wantInj) {
		t.Fatalf("%d plan entries for %d injections, want one each and at least 5", len(planned), len(wantInj))
	}
	kinds := map[string]bool{}
	for i, pf := range planned {
		kinds[pf.Fault] = true
		if i > 0 && pf.At < planned[i-1].At {
			t.Errorf("entry %d at %v before entry %d at %v", i, pf.At, i-1, planned[i-1].At)
		}
		if pf.Outcome != "ok" || pf.Lasts <= 0 {
			t.Errorf("entry %d: outcome %q, lasts %v, want ok and a positive stay", i, pf.Outcome, pf.Lasts)
		}
		switch pf.Fault {
		case "kill-node", "pause-client":
			if len(pf.Pins) != 1 || !slices.Equal(pf.Pins, pf.Hit) {
				t.Errorf("entry %d (%s): pins %v, want the one target it hit, %v", i, pf.Fault, pf.Pins, pf.Hit)
			}
		case "clock-bump":
			if d := pf.Settings["clock-direction"]; d != ClockForward && d != ClockBackward || len(pf.Pins) != 1 {
				t.Errorf("entry %d: clock-bump with direction %q and pins %v", i, d, pf.Pins)
			}
		case "isolate", "halves", "client-isolate":
			if len(pf.Cuts) == 0 || len(pf.Pins) != 0 || !slices.Equal(pf.Cuts, pf.Hit) {
				t.Errorf("entry %d (%s): cuts %v pins %v hit %v, want its cuts only", i, pf.Fault, pf.Cuts, pf.Pins, pf.Hit)
			}
		}
	}
	if len(kinds) < 3 {
		t.Fatalf("seed 7 planned only %v", kinds)
	}

	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(Plan{SchemaVersion: PlanSchemaVersion, Seed: 7, Interval: 10 * time.Millisecond, Faults: planned}); err != nil {
		t.Fatal(err)
	}
	plan, err := ReadPlan(&buf)
	if err != nil {
		t.Fatalf("ReadPlan of a written plan: %v", err)
	}
	// Other magnitudes in the replaying run: the plan's must win.
	renv, _, _ := planEnv(time.Hour, time.Hour, time.Minute)
	steps, err := BuildPlan(plan, renv)
	if err != nil {
		t.Fatal(err)
	}
	r := newSchedule(time.Hour, 99)
	r.Steps = steps
	rctx, rcancel := context.WithTimeout(context.Background(), 800*time.Millisecond+2*time.Second)
	defer rcancel()
	if err := r.Run(rctx); err != nil {
		t.Fatal(err)
	}
	gotInj, gotHeals := faultops.Lines(r.Recorder.History())
	if !slices.Equal(gotInj, wantInj) {
		t.Errorf("replayed injections differ:\n got %q\nwant %q", gotInj, wantInj)
	}
	if !slices.Equal(gotHeals, wantHeals) {
		t.Errorf("replayed heals differ:\n got %q\nwant %q", gotHeals, wantHeals)
	}
	replanned := r.Planned()
	if len(replanned) != len(planned) {
		t.Fatalf("the replay's own plan has %d entries, want %d", len(replanned), len(planned))
	}
	for i := range planned {
		a, b := planned[i], replanned[i]
		if a.Fault != b.Fault || !slices.Equal(a.Pins, b.Pins) || !slices.Equal(a.Cuts, b.Cuts) || fmt.Sprint(a.Settings) != fmt.Sprint(b.Settings) {
			t.Errorf("entry %d: replayed as %+v, planned %+v", i, b, a)
		}
		// Offsets are kept: a replayed injection begins at its offset (as
		// the file has it, to the millisecond) or later, never earlier.
		if at := plan.Faults[i].At; b.At < at {
			t.Errorf("entry %d replayed at %v, before its offset %v", i, b.At, at)
		}
	}
}

// A fault at a pause point hits the first worker to get there: its plan
// pins the candidates, not the winner of that race.
func TestPlanPinsTheCandidatesOfAPausePoint(t *testing.T) {
	for _, tc := range []struct {
		pins []string
		want []string
	}{
		{nil, nil},
		{[]string{"p0", "p2"}, []string{"p0", "p2"}},
	} {
		pool := &fakeClients{procs: []int{0, 1, 2}}
		env := Env{Clients: pool}.With(Pause.Is(time.Millisecond), PausePoint.Is("after-acquire"))
		if tc.pins != nil {
			env.Targets = map[string][]string{"pause-client": tc.pins}
		}
		s := newSchedule(time.Hour, 1, buildOne(t, "pause-client", env))
		ok, _ := s.injectPlanned(context.Background(), s.Faults[0], testRng(), slog.New(slog.DiscardHandler), time.Now())
		if !ok {
			t.Fatalf("pins %v: the pause did not apply: %v", tc.pins, pool.log())
		}
		got := s.Planned()[0]
		if !slices.Equal(got.Pins, tc.want) || len(got.Hit) != 1 || got.Settings["pause-point"] != "after-acquire" || got.Settings["pause"] != "1ms" {
			t.Errorf("pins %v: planned %+v, want pins %v, one hit, and the point and pause", tc.pins, got, tc.want)
		}
		s.Faults[0].Heal(context.Background())
	}
}

// Every setting a fault reads can be recorded and replayed: its flag's
// text parses into Values and renders back the same, and a text its flag
// refuses, or a value out of its bound, is refused with what it wants.
func TestEveryFaultSettingCanBePlanned(t *testing.T) {
	samples := map[string]struct{ good, bad, want string }{
		"pause":           {"1.5s", "soon", `"soon" is not a duration`},
		"pause-point":     {"after-acquire", "", ""},
		"down":            {"2s", "-2s", "must not be negative, got -2s"},
		"window":          {"250ms", "0s", "must be positive, got 0s"},
		"clock-bump":      {"30s", "1 minute", "is not a duration"},
		"clock-direction": {"backward", "sideways", `must be forward or backward, got "sideways"`},
		"strobe":          {"10ms", "", "is not a duration"},
		"sync-delay":      {"1.5s", "0s", "must be positive and at most 10m0s, got 0s"},
		"delay":           {"50ms", "fast", "is not a duration"},
		"loss":            {"0.25", "1.5", "must be in (0, 1], got 1.5"},
		"clock-rate":      {"0.5", "1", "must be positive and not 1, got 1"},
		"kill-holder":     {"true", "yes please", `"yes please" is not true or false`},
		"partition":       {"n1,n2/n3,c0", "n1,n2", "one group"},
	}
	read := map[string]bool{}
	for _, s := range Specs() {
		for _, name := range s.Settings {
			read[name] = true
		}
	}
	for _, st := range Declared() {
		name := st.Name()
		if !read[name] {
			t.Errorf("setting %s is declared but no fault reads it", name)
		}
		sample, ok := samples[name]
		if !ok {
			t.Errorf("setting %s has no sample in this test", name)
			continue
		}
		var vs Values
		if err := st.SetText(&vs, sample.good); err != nil {
			t.Errorf("%s=%q: %v", name, sample.good, err)
		} else if got := st.Text(vs); got != sample.good {
			t.Errorf("%s=%q renders back as %q", name, sample.good, got)
		} else if err := st.Check(vs); err != nil {
			t.Errorf("%s=%q: %v", name, sample.good, err)
		}
		if sample.want == "" {
			continue
		}
		err := st.SetText(&vs, sample.bad)
		if err == nil {
			err = st.Check(vs)
		}
		if err == nil || !strings.Contains(err.Error(), sample.want) {
			t.Errorf("%s=%q: got %v, want an error saying %q", name, sample.bad, err, sample.want)
		}
	}
}

// Defaults gives every declared setting its default, which keeps its
// bound; Of reads a setting no one set as its type's zero value.
func TestDefaultsKeepTheirBounds(t *testing.T) {
	defs := Defaults()
	for _, st := range Declared() {
		if err := st.Check(defs); err != nil {
			t.Errorf("the default of %s: %v", st.Name(), err)
		}
	}
	if Window.Of(defs) != 2*time.Second || PausePoint.Text(defs) != "after-acquire" || Loss.Of(defs) != 0.3 {
		t.Errorf("defaults: window %v, pause point %s, loss %v", Window.Of(defs), PausePoint.Text(defs), Loss.Of(defs))
	}
	var none Values
	if Window.Of(none) != 0 || PausePoint.Text(none) != "random" {
		t.Errorf("no values: window %v, pause point %s", Window.Of(none), PausePoint.Text(none))
	}
}

// Readers are the faults whose Spec reads a setting, sorted.
func TestReadersAreTheSpecsThatReadASetting(t *testing.T) {
	if got, want := Readers("down"), []string{"kill-all", "kill-node", "kill-on-grant", "power-loss", "power-loss-all"}; !slices.Equal(got, want) {
		t.Errorf("Readers(down) = %v, want %v", got, want)
	}
	if got := Readers("no-such-setting"); got != nil {
		t.Errorf("Readers(no-such-setting) = %v, want none", got)
	}
}

// A fault that reads a setting no Setting declares is refused at its
// registration, before anything of it is registered.
func TestRegisterRefusesAnUndeclaredSetting(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), `"no-such-setting"`) {
			t.Errorf("Register: recovered %v, want a panic naming the setting", r)
		}
		if _, ok := lookup("undeclared-setting-test"); ok {
			t.Error("the refused fault was registered")
		}
	}()
	Register(Spec{FaultKind: history.FaultKind{Name: "undeclared-setting-test"}, Settings: []string{"no-such-setting"},
		New: func(Env) (Fault, error) { return nil, nil }})
}

// Set on a copy of an Env leaves the original's value alone: a replay
// gives each entry its own settings over the run's.
func TestSettingsOfACopyAreItsOwn(t *testing.T) {
	base := Env{}.With(Window.Is(time.Second))
	other := base.With(Window.Is(time.Minute))
	Pause.Set(&other.Settings, time.Hour)
	if Window.Of(base) != time.Second || Pause.Of(base) != 0 {
		t.Errorf("the original changed: window %v, pause %v", Window.Of(base), Pause.Of(base))
	}
	if Window.Of(other) != time.Minute || Pause.Of(other) != time.Hour {
		t.Errorf("the copy: window %v, pause %v", Window.Of(other), Pause.Of(other))
	}
}

// A bad schedule file is one line naming the field.
func TestReadPlanErrorsNameTheField(t *testing.T) {
	entry := func(s string) string {
		return `{"schema_version":1,"seed":1,"faults":[` + s + `]}`
	}
	for _, tc := range []struct{ in, want string }{
		{`not json`, "not a schedule file"},
		{`{"schema_version":2,"faults":[]}`, "schema_version: this locktest reads version 1, got 2"},
		{`{"schema_version":1}`, "faults: missing"},
		{`{"schema_version":1,"faults":[],"extra":1}`, `unknown field "extra"`},
		{`{"schema_version":1,"seed":"x","faults":[]}`, "seed: want int64"},
		{entry(`{"at":"soon","fault":"kill-node","lasts":"1s"}`), `faults[0].at: want a duration such as 1.5s, got "soon"`},
		{entry(`{"at":"-1s","fault":"kill-node","lasts":"1s"}`), `faults[0].at: must not be negative`},
		{entry(`{"at":"1s","fault":"kill-node"}`), `faults[0].lasts: missing`},
		{entry(`{"at":"1s","fault":"kill-nodes","lasts":"1s"}`), `faults[0].fault: unknown fault "kill-nodes"`},
		{entry(`{"at":"1s","fault":"kill-node","lasts":"1s","settings":{"pause":"1s"}}`), `faults[0].settings.pause: kill-node does not read it`},
		{entry(`{"at":"1s","fault":"pause-client","lasts":"1s","settings":{"pause":"long"}}`), `faults[0].settings.pause: "long" is not a duration (e.g. 300ms, 2s)`},
		{entry(`{"at":"1s","fault":"loss","lasts":"1s","settings":{"loss":"2"}}`), `faults[0].settings.loss: must be in (0, 1], got 2`},
		{entry(`{"at":"1s","fault":"kill-node","lasts":"1s","pins":["p1"]}`), `faults[0].pins: kill-node=p1: kill-node hits nodes`},
		{entry(`{"at":"1s","fault":"kill-node","lasts":"1s","cuts":["n1|n2"]}`), `faults[0].cuts: kill-node is not a partition`},
		{entry(`{"at":"1s","fault":"isolate","lasts":"1s","cuts":["n1"]}`), `faults[0].cuts: cut "n1": want hosts|hosts`},
		{entry(`{"at":"1s","fault":"isolate","lasts":"1s","outcome":"maybe"}`), `faults[0].outcome: want ok, info or fail`},
		{entry(`{"at":"2s","fault":"isolate","lasts":"1s"},{"at":"1s","fault":"isolate","lasts":"1s"}`), `faults: not in the order of their at`},
	} {
		_, err := ReadPlan(strings.NewReader(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("ReadPlan(%s): %v, want one line with %q", tc.in, err, tc.want)
		}
	}
}

// BuildPlan refuses what the run cannot have, naming the entry.
func TestBuildPlanRefusesWhatTheRunLacks(t *testing.T) {
	env, _, _ := planEnv(time.Second, time.Second, time.Second)
	for _, tc := range []struct {
		pf   PlannedFault
		want string
	}{
		{PlannedFault{At: time.Second, Fault: "kill-node", Pins: []string{"n9"}}, "faults[0] (kill-node at 1s): pins: kill-node=n9"},
		{PlannedFault{At: time.Second, Fault: "pause-client", Pins: []string{"p7"}}, "faults[0] (pause-client at 1s): pins: pause-client=p7: the run starts workers p0, p1, p2"},
		{PlannedFault{At: time.Second, Fault: "isolate", Cuts: []string{"n1|n9"}}, `faults[0] (isolate at 1s): cut n1|n9 names host "n9"`},
		{PlannedFault{At: time.Second, Fault: "delay"}, "faults[0] (delay at 1s): "},
	} {
		_, err := BuildPlan(Plan{SchemaVersion: PlanSchemaVersion, Faults: []PlannedFault{tc.pf}}, env)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("BuildPlan(%+v): %v, want %q", tc.pf, err, tc.want)
		}
	}
}

// A replay's faults may overlap (a hand-written plan, or combined
// faults): its ops are still one at a time, invocation to completion, in
// time order, as the history of one process must be. Here b comes due
// while a is in, and its heal (at 120 ms) while a's heal (100–150 ms) is
// under way.
func TestReplayOfOverlappingFaultsKeepsOneOpAtATime(t *testing.T) {
	a := &fakeFault{name: "a", onHeal: func() { time.Sleep(50 * time.Millisecond) }}
	b := &fakeFault{name: "b"}
	s := newSchedule(time.Hour, 1)
	s.Steps = &PlanSteps{steps: []planStep{
		{PlannedFault{At: 0, Fault: "a", Lasts: 100 * time.Millisecond}, a},
		{PlannedFault{At: 20 * time.Millisecond, Fault: "b", Lasts: 100 * time.Millisecond}, b},
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := s.Run(ctx); err != nil {
		t.Fatal(err)
	}
	h := s.Recorder.History()
	if len(h) != 8 {
		t.Fatalf("%d ops, want 8 (2 injections and 2 heals, each invoked and completed): %v", len(h), h)
	}
	for i := 0; i < len(h); i += 2 {
		if h[i].Type != history.Invoke || h[i+1].Type == history.Invoke || h[i].F != h[i+1].F {
			t.Errorf("ops %d and %d are not one op's invocation and completion: %v, %v", i, i+1, h[i], h[i+1])
		}
		if i > 0 && h[i].Time < h[i-1].Time {
			t.Errorf("op %d at %d before op %d at %d", i, h[i].Time, i-1, h[i-1].Time)
		}
	}
}

// A replay keeps the order of heals and injections its plan shows: a was
// healed (at 60 ms) before b began (at 80 ms), so b goes in after a's
// heal even when a's injection is 100 ms late (found under stress-ng: a
// late clock jump still in when the next one came read the first's
// offset as its base).
func TestReplayKeepsTheOrderOfHealsAndInjections(t *testing.T) {
	for _, tc := range []struct {
		name string
		a    PlannedFault
	}{
		{"healed given", PlannedFault{At: 0, Fault: "a", Lasts: 50 * time.Millisecond, Healed: 60 * time.Millisecond}},
		{"healed not given: at and lasts", PlannedFault{At: 0, Fault: "a", Lasts: 50 * time.Millisecond}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &fakeFault{name: "a", onInject: func() { time.Sleep(100 * time.Millisecond) }}
			b := &fakeFault{name: "b"}
			s := newSchedule(time.Hour, 1)
			s.Steps = &PlanSteps{steps: []planStep{
				{tc.a, a},
				{PlannedFault{At: 80 * time.Millisecond, Fault: "b", Lasts: 10 * time.Millisecond}, b},
			}}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			if err := s.Run(ctx); err != nil {
				t.Fatal(err)
			}
			var fs []string
			for _, op := range s.Recorder.History() {
				if op.Type == history.Invoke {
					fs = append(fs, op.F)
				}
			}
			if want := []string{"a", "heal-a", "b", "heal-b"}; !slices.Equal(fs, want) {
				t.Errorf("ops %v, want %v", fs, want)
			}
			if p := s.Planned(); len(p) != 2 || p[0].Healed < 150*time.Millisecond || p[1].At < p[0].Healed {
				t.Errorf("plan of the replay %+v: a healed at 150 ms or later, b after it", p)
			}
		})
	}
}
