package nemesis

import (
	"context"
	"errors"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/locktest/locktest/history"
)

func TestNames(t *testing.T) {
	got := Names()
	if !slices.IsSorted(got) {
		t.Errorf("Names() = %v, not sorted", got)
	}
	for _, want := range []string{"kill-node", "pause-client"} {
		if !slices.Contains(got, want) {
			t.Errorf("Names() = %v, missing %s", got, want)
		}
	}
}

func TestBuild(t *testing.T) {
	pool := &fakeClients{procs: []int{1}}
	killer := newLiveCluster("n1")
	good := Env{Cluster: killer, Clients: pool, ClientPause: time.Second, NodeDown: time.Second}
	for _, tc := range []struct {
		name  string
		names []string
		env   Env
		// want lists the built faults' names; on error, wantIs (if set) is
		// what the error wraps and wantText what it must say.
		want     []string
		wantIs   error
		wantText []string
	}{
		{name: "both", names: []string{"pause-client", "kill-node"}, env: good,
			want: []string{"pause-client", "kill-node"}},
		{name: "none", env: good},
		{name: "unknown", names: []string{"pause-client", "flood"}, env: good,
			wantText: append([]string{`"flood"`}, Names()...)},
		{name: "kill-node without Killer", names: []string{"kill-node"},
			env:    Env{Cluster: &fakeCluster{nodes: nodes("n1")}, NodeDown: time.Second},
			wantIs: ErrUnavailable, wantText: []string{"kill-node"}},
		{name: "kill-node without cluster", names: []string{"kill-node"}, env: Env{},
			wantIs: ErrUnavailable, wantText: []string{"kill-node"}},
		{name: "pause-client without Clients", names: []string{"pause-client"},
			env:    Env{Cluster: killer, ClientPause: time.Second},
			wantIs: ErrUnavailable, wantText: []string{"pause-client"}},
		{name: "pause-client without pause", names: []string{"pause-client"},
			env:      Env{Clients: pool},
			wantText: []string{"pause-client", "positive"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs, err := Build(tc.names, tc.env)
			if tc.wantIs != nil || tc.wantText != nil {
				if err == nil {
					t.Fatalf("Build(%v) = %d faults, want an error", tc.names, len(fs))
				}
				if tc.wantIs != nil && !errors.Is(err, tc.wantIs) {
					t.Errorf("Build(%v) error %q does not wrap %q", tc.names, err, tc.wantIs)
				}
				for _, s := range tc.wantText {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("Build(%v) error %q does not say %s", tc.names, err, s)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("Build(%v): %v", tc.names, err)
			}
			var got []string
			for _, f := range fs {
				got = append(got, f.Name())
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("Build(%v) built %v, want %v", tc.names, got, tc.want)
			}
		})
	}
}

func TestPauseClientInject(t *testing.T) {
	const pause = 250 * time.Millisecond
	stopErr := errors.New("os: process already finished")
	for _, tc := range []struct {
		name      string
		point     string
		pool      *fakeClients
		cancelled bool // Inject gets a done ctx
		wantErr   bool
		// unknown: the inject failed but may have had an effect (recorded
		// info); otherwise a failed inject certainly changed nothing.
		unknown  bool
		want     []string // the pool calls of Inject, in order
		wantHeal []string // the pool calls of the Heal that follows
	}{
		{name: "at a pause point", point: "after-acquire", pool: &fakeClients{procs: []int{3}},
			// The worker must be stopped while it waits at the point, and
			// told to go on only after it was resumed: a SIGSTOP the kernel
			// applies late must not let it past the point.
			want:     []string{"arm p3 after-acquire", "wait p3", "SIGSTOP p3"},
			wantHeal: []string{"SIGCONT p3", "continue p3"}},
		{name: "at a random moment", pool: &fakeClients{procs: []int{3}},
			want: []string{"SIGSTOP p3"}, wantHeal: []string{"SIGCONT p3"}},
		{name: "point never reached", point: "before-write",
			pool: &fakeClients{procs: []int{3}, waitErr: errors.New("worker p3 exited")},
			// The given-up arm is disarmed, so the worker never blocks at
			// the point later with no one to release it.
			wantErr: true, want: []string{"arm p3 before-write", "wait p3", "disarm p3"}},
		{name: "run ends while waiting", point: "before-write", pool: &fakeClients{procs: []int{3}},
			cancelled: true, wantErr: true, want: []string{"arm p3 before-write", "wait p3", "disarm p3"}},
		{name: "arm fails", point: "after-acquire",
			pool:    &fakeClients{procs: []int{3}, armErr: errors.New("broken pipe")},
			wantErr: true, want: []string{"arm p3 after-acquire"}},
		{name: "SIGSTOP fails at a point", point: "after-acquire",
			pool: &fakeClients{procs: []int{3}, signalErr: map[syscall.Signal]error{syscall.SIGSTOP: stopErr}},
			// The stop may have landed: it is undone at once.
			wantErr: true, unknown: true, want: []string{"arm p3 after-acquire", "wait p3", "SIGSTOP p3", "SIGCONT p3", "continue p3"}},
		{name: "SIGSTOP fails", pool: &fakeClients{procs: []int{3}, signalErr: map[syscall.Signal]error{syscall.SIGSTOP: stopErr}},
			wantErr: true, unknown: true, want: []string{"SIGSTOP p3", "SIGCONT p3"}},
		{name: "no live client", point: "after-acquire", pool: &fakeClients{},
			wantErr: true, want: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := buildOne(t, "pause-client", Env{Clients: tc.pool, ClientPause: pause, PausePoint: tc.point})
			if f.Name() != "pause-client" || f.HealName() != "resume-client" || f.Duration() != pause {
				t.Errorf("fault is %s/%s for %v, want pause-client/resume-client for %v",
					f.Name(), f.HealName(), f.Duration(), pause)
			}
			ctx, cancel := context.WithCancel(context.Background())
			if tc.cancelled {
				cancel()
			}
			defer cancel()
			v, err := f.Inject(ctx, testRng())
			if got := tc.pool.log(); !slices.Equal(got, tc.want) {
				t.Errorf("Inject made calls %q, want %q", got, tc.want)
			}
			if tc.wantErr {
				// Nothing is paused: the schedule must record fail, not
				// info, unless the effect is unknown.
				if err == nil || errors.Is(err, errNotApplied) == tc.unknown {
					t.Errorf("Inject error %v, want one that wraps errNotApplied: %v", err, !tc.unknown)
				}
			} else {
				if err != nil {
					t.Fatalf("Inject: %v", err)
				}
				if !slices.Equal(v.Targets, []string{"p3"}) || v.Point != tc.point || v.Duration != int64(pause) {
					t.Errorf("Inject value %+v, want targets [p3], point %q, duration %d", v, tc.point, int64(pause))
				}
			}
			n := len(tc.pool.log())
			hv, err := f.Heal(context.Background())
			if err != nil {
				t.Fatalf("Heal: %v", err)
			}
			if got := tc.pool.log()[n:]; !slices.Equal(got, tc.wantHeal) {
				t.Errorf("Heal made calls %q, want %q", got, tc.wantHeal)
			}
			if tc.wantHeal != nil && !slices.Equal(hv.Targets, []string{"p3"}) {
				t.Errorf("Heal value %+v, want targets [p3]", hv)
			}
			// A second heal has nothing left to undo.
			n = len(tc.pool.log())
			hv, err = f.Heal(context.Background())
			if err != nil || hv.Targets != nil {
				t.Errorf("second Heal = %+v, %v; want an empty value and no error", hv, err)
			}
			if got := tc.pool.log()[n:]; len(got) != 0 {
				t.Errorf("second Heal made calls %q, want none", got)
			}
		})
	}
}

// A heal that failed leaves what it could not undo for the next heal, which
// tries again: a worker still stopped, a node still down.
func TestHealRetriesAfterFailure(t *testing.T) {
	healErr := errors.New("no such process")
	for _, tc := range []struct {
		fault string
		// env returns an env whose heal of the fault fails with healErr
		// until fix is called, and the log of its calls.
		env  func() (env Env, calls *callLog, fix func())
		want []string
	}{
		{"pause-client", func() (Env, *callLog, func()) {
			pool := &fakeClients{procs: []int{5}, signalErr: map[syscall.Signal]error{syscall.SIGCONT: healErr}}
			return Env{Clients: pool, ClientPause: time.Second}, &pool.callLog, func() { pool.locked(func() { pool.signalErr = nil }) }
		}, []string{"SIGSTOP p5", "SIGCONT p5", "SIGCONT p5"}},
		{"kill-node", func() (Env, *callLog, func()) {
			c := newLiveCluster("n1")
			c.restartErr = healErr
			return Env{Cluster: c, NodeDown: time.Second}, &c.callLog, func() { c.locked(func() { c.restartErr = nil }) }
		}, []string{"kill n1", "restart n1", "restart n1"}},
	} {
		t.Run(tc.fault, func(t *testing.T) {
			env, calls, fix := tc.env()
			f := buildOne(t, tc.fault, env)
			if _, err := f.Inject(context.Background(), testRng()); err != nil {
				t.Fatalf("Inject: %v", err)
			}
			if _, err := f.Heal(context.Background()); !errors.Is(err, healErr) {
				t.Fatalf("Heal error %v, want one wrapping %v", err, healErr)
			}
			fix()
			if _, err := f.Heal(context.Background()); err != nil {
				t.Fatalf("second Heal: %v", err)
			}
			if got := calls.log(); !slices.Equal(got, tc.want) {
				t.Errorf("calls %q, want %q", got, tc.want)
			}
		})
	}
}

func TestPauseClientTargetsALiveProcess(t *testing.T) {
	pool := &fakeClients{procs: []int{2, 4, 6}}
	f := buildOne(t, "pause-client", Env{Clients: pool, ClientPause: time.Second})
	rng := testRng()
	seen := map[string]bool{}
	for range 30 {
		v, err := f.Inject(context.Background(), rng)
		if err != nil {
			t.Fatalf("Inject: %v", err)
		}
		if len(v.Targets) != 1 || !slices.Contains([]string{"p2", "p4", "p6"}, v.Targets[0]) {
			t.Fatalf("Inject targeted %v, not one of the live processes", v.Targets)
		}
		seen[v.Targets[0]] = true
		hv, err := f.Heal(context.Background())
		if err != nil || !slices.Equal(hv.Targets, v.Targets) {
			t.Fatalf("Heal = %+v, %v; want it to resume %v", hv, err, v.Targets)
		}
	}
	if len(seen) < 2 {
		t.Errorf("30 injections over 3 processes all hit %v", seen)
	}
}

func TestKillNode(t *testing.T) {
	const down = 400 * time.Millisecond
	c := newLiveCluster("n1", "n2", "n3")
	f := buildOne(t, "kill-node", Env{Cluster: c, NodeDown: down})
	if f.Name() != "kill-node" || f.HealName() != "restart-node" || f.Duration() != down {
		t.Errorf("fault is %s/%s for %v, want kill-node/restart-node for %v", f.Name(), f.HealName(), f.Duration(), down)
	}
	rng := testRng()
	for round := range 5 {
		before := len(c.log())
		v, err := f.Inject(context.Background(), rng)
		if err != nil {
			t.Fatalf("round %d: Inject: %v", round, err)
		}
		if len(v.Targets) != 1 || v.Duration != int64(down) {
			t.Fatalf("round %d: Inject value %+v, want one target and duration %d", round, v, int64(down))
		}
		killed := v.Targets[0]
		hv, err := f.Heal(context.Background())
		if err != nil {
			t.Fatalf("round %d: Heal: %v", round, err)
		}
		if !slices.Equal(hv.Targets, []string{killed}) {
			t.Errorf("round %d: Heal value %+v, want targets [%s]", round, hv, killed)
		}
		hv, err = f.Heal(context.Background())
		if err != nil || hv.Targets != nil {
			t.Errorf("round %d: second Heal = %+v, %v; want an empty value and no error", round, hv, err)
		}
		want := []string{"kill " + killed, "restart " + killed}
		if got := c.log()[before:]; !slices.Equal(got, want) {
			t.Errorf("round %d: calls %q, want %q", round, got, want)
		}
	}
}

func TestKillNodeHealRestartsEveryKilledNodeOnce(t *testing.T) {
	c := newLiveCluster("n1", "n2", "n3")
	f := buildOne(t, "kill-node", Env{Cluster: c, NodeDown: time.Second})
	rng := testRng()
	var killed []string
	for range 6 {
		v, err := f.Inject(context.Background(), rng)
		if err != nil {
			t.Fatalf("Inject: %v", err)
		}
		if !slices.Contains(killed, v.Targets[0]) {
			killed = append(killed, v.Targets[0])
		}
	}
	before := len(c.log())
	hv, err := f.Heal(context.Background())
	if err != nil {
		t.Fatalf("Heal: %v", err)
	}
	var want []string
	for _, n := range killed {
		want = append(want, "restart "+n)
	}
	if got := c.log()[before:]; !slices.Equal(got, want) {
		t.Errorf("Heal made calls %q, want %q (each killed node once, in kill order)", got, want)
	}
	if !slices.Equal(hv.Targets, killed) {
		t.Errorf("Heal value targets %v, want %v", hv.Targets, killed)
	}
}

func TestKillNodeHealAfterFailures(t *testing.T) {
	t.Run("kill fails", func(t *testing.T) {
		// The kill's outcome is unknown (the schedule records info): the
		// node may be down, so the heal restarts it.
		killErr := errors.New("kill timed out")
		c := newLiveCluster("n1")
		c.killErr = killErr
		f := buildOne(t, "kill-node", Env{Cluster: c, NodeDown: time.Second})
		_, err := f.Inject(context.Background(), testRng())
		if !errors.Is(err, killErr) || errors.Is(err, errNotApplied) {
			t.Fatalf("Inject error %v, want one wrapping %v and not errNotApplied", err, killErr)
		}
		if completion(err) != history.Info {
			t.Errorf("a failed kill is recorded as %s, want %s", completion(err), history.Info)
		}
		if _, err := f.Heal(context.Background()); err != nil {
			t.Fatalf("Heal: %v", err)
		}
		if want, got := []string{"kill n1", "restart n1"}, c.log(); !slices.Equal(got, want) {
			t.Errorf("calls %q, want %q", got, want)
		}
	})
	t.Run("no nodes", func(t *testing.T) {
		c := &liveCluster{}
		f := buildOne(t, "kill-node", Env{Cluster: c, NodeDown: time.Second})
		if _, err := f.Inject(context.Background(), testRng()); !errors.Is(err, errNotApplied) {
			t.Errorf("Inject on a cluster without nodes: %v, want errNotApplied", err)
		}
		if _, err := f.Heal(context.Background()); err != nil {
			t.Errorf("Heal: %v", err)
		}
		if got := c.log(); len(got) != 0 {
			t.Errorf("calls %q, want none", got)
		}
	})
}

// TestScheduleWithPauseClient runs the real pause-client fault on the
// schedule against the fake pool: every SIGSTOP is followed by a SIGCONT,
// also when the run is cancelled during the pause.
func TestScheduleWithPauseClient(t *testing.T) {
	pool := &fakeClients{procs: []int{1, 2}}
	f := buildOne(t, "pause-client", Env{Clients: pool, ClientPause: 15 * time.Millisecond, PausePoint: "after-acquire"})
	s := newSchedule(10*time.Millisecond, 3, f)
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	if err := s.Run(ctx); err != nil {
		t.Fatalf("Run: %v", err)
	}
	calls := pool.log()
	stopped := map[string]bool{}
	stops := 0
	for _, c := range calls {
		name, p, _ := strings.Cut(c, " ")
		switch name {
		case "SIGSTOP":
			if stopped[p] {
				t.Errorf("%s stopped twice without a SIGCONT: %q", p, calls)
			}
			stopped[p] = true
			stops++
		case "SIGCONT":
			if !stopped[p] {
				t.Errorf("%s resumed without being stopped: %q", p, calls)
			}
			stopped[p] = false
		}
	}
	for p, st := range stopped {
		if st {
			t.Errorf("%s left stopped after Run: %q", p, calls)
		}
	}
	if stops == 0 || stops != s.Applied() {
		t.Errorf("%d SIGSTOPs, Applied() = %d; want the same, at least 1", stops, s.Applied())
	}
	for _, o := range s.Recorder.History() {
		if o.F == "pause-client" && o.Type == history.OK && o.Value.Point != "after-acquire" {
			t.Errorf("pause op without its point: %s", o)
		}
	}
}

func TestBuildCombined(t *testing.T) {
	env := Env{Window: time.Second, ClientPause: time.Second, Clients: nil}
	if !Known("pause-node+kill-node") || Known("pause-node+bogus") {
		t.Error("Known misjudges combined names")
	}
	if _, err := Build([]string{"pause-node+bogus"}, env); err == nil || !strings.Contains(err.Error(), `"bogus"`) {
		t.Errorf("combined with an unknown part: %v", err)
	}
}
