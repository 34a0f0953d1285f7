package nemesis

import (
	"context"
	"errors"
	"fmt"
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
	good := Env{Cluster: killer, Clients: pool}.With(Pause.Is(time.Second), Down.Is(time.Second))
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
			env:    Env{Cluster: &fakeCluster{nodes: nodes("n1")}}.With(Down.Is(time.Second)),
			wantIs: ErrUnavailable, wantText: []string{"kill-node"}},
		{name: "kill-node without cluster", names: []string{"kill-node"}, env: Env{},
			wantIs: ErrUnavailable, wantText: []string{"kill-node"}},
		{name: "pause-client without Clients", names: []string{"pause-client"},
			env:    Env{Cluster: killer}.With(Pause.Is(time.Second)),
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

func TestBuildCombined(t *testing.T) {
	env := Env{Clients: nil}.With(Window.Is(time.Second), Pause.Is(time.Second))
	if !Known("pause-node+kill-node") || Known("pause-node+bogus") {
		t.Error("Known misjudges combined names")
	}
	if _, err := Build([]string{"pause-node+bogus"}, env); err == nil || !strings.Contains(err.Error(), `"bogus"`) {
		t.Errorf("combined with an unknown part: %v", err)
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
			f := buildOne(t, "pause-client", Env{Clients: tc.pool}.With(Pause.Is(pause), PausePoint.Is(tc.point)))
			wantKind(t, f, "pause-client", "resume-client", pause)
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
			return Env{Clients: pool}.With(Pause.Is(time.Second)), &pool.callLog, func() { pool.locked(func() { pool.signalErr = nil }) }
		}, []string{"SIGSTOP p5", "SIGCONT p5", "SIGCONT p5"}},
		{"kill-node", func() (Env, *callLog, func()) {
			c := newLiveCluster("n1")
			c.restartErr = healErr
			return Env{Cluster: c}.With(Down.Is(time.Second)), &c.callLog, func() { c.locked(func() { c.restartErr = nil }) }
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
	f := buildOne(t, "pause-client", Env{Clients: pool}.With(Pause.Is(time.Second)))
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
	f := buildOne(t, "kill-node", Env{Cluster: c}.With(Down.Is(down)))
	wantKind(t, f, "kill-node", "restart-node", down)
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
	f := buildOne(t, "kill-node", Env{Cluster: c}.With(Down.Is(time.Second)))
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
		f := buildOne(t, "kill-node", Env{Cluster: c}.With(Down.Is(time.Second)))
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
	t.Run("kill cut short by the run's deadline", func(t *testing.T) {
		// A kill sent over SSH whose command outlived the fault phase may
		// have landed: info, not fail, and the heal restarts the node.
		c := newLiveCluster("n1")
		c.killErr = fmt.Errorf("kill -KILL 404: ssh h1: %w", context.DeadlineExceeded)
		f := buildOne(t, "kill-node", Env{Cluster: c}.With(Down.Is(time.Second)))
		_, err := f.Inject(context.Background(), testRng())
		if completion(err) != history.Info {
			t.Errorf("a kill cut short by the deadline is recorded as %s (%v), want %s", completion(err), err, history.Info)
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
		f := buildOne(t, "kill-node", Env{Cluster: c}.With(Down.Is(time.Second)))
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
	f := buildOne(t, "pause-client", Env{Clients: pool}.With(Pause.Is(15*time.Millisecond), PausePoint.Is("after-acquire")))
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

func TestShapes(t *testing.T) {
	clients := []string{"c0", "c1", "c2"}
	for seed := uint64(0); seed < 50; seed++ {
		for _, n := range []int{3, 5, 7} {
			nodes := names("n", n)

			// isolate: exactly one node reaches no one; everyone else
			// reaches everyone else.
			cuts, err := ShapeCuts("isolate", nodes, clients, nil, seeded(seed, 1))
			if err != nil {
				t.Fatal(err)
			}
			var alone []string
			for _, x := range nodes {
				seen := 0
				for _, y := range append(slices.Clone(nodes), clients...) {
					if x != y && reach(cuts, x, y) {
						seen++
					}
				}
				if seen == 0 {
					alone = append(alone, x)
				}
			}
			if len(alone) != 1 {
				t.Fatalf("isolate n=%d seed=%d: isolated %v, want one node", n, seed, alone)
			}

			// halves: the nodes split into two groups, each connected within,
			// none across; every client is on exactly one side.
			cuts, _ = ShapeCuts("halves", nodes, clients, nil, seeded(seed, 1))
			a, b := cuts[0].A, cuts[0].B
			if len(cuts) != 1 || len(a)+len(b) != n+len(clients) {
				t.Fatalf("halves n=%d: %v", n, cuts)
			}
			na := 0
			for _, x := range a {
				if strings.HasPrefix(x, "n") {
					na++
				}
			}
			if na != n/2 {
				t.Errorf("halves n=%d: first side has %d nodes, want %d", n, na, n/2)
			}

			// bridge: one node reaches everyone; the others do not reach
			// across.
			cuts, _ = ShapeCuts("bridge", nodes, clients, nil, seeded(seed, 1))
			bridges := 0
			for _, x := range nodes {
				all := true
				for _, y := range nodes {
					all = all && reach(cuts, x, y)
				}
				if all {
					bridges++
				}
			}
			if bridges != 1 {
				t.Errorf("bridge n=%d seed=%d: %d nodes see all, want 1: %v", n, seed, bridges, cuts)
			}

			// majorities-ring: each node sees a majority (itself included),
			// no two the same one; clients see every node.
			cuts, err = ShapeCuts("majorities-ring", nodes, clients, nil, seeded(seed, 1))
			if n < 5 {
				if err == nil {
					t.Errorf("majorities-ring with %d nodes accepted", n)
				}
			} else {
				views := map[string]bool{}
				for _, x := range nodes {
					var v []string
					for _, y := range nodes {
						if reach(cuts, x, y) {
							v = append(v, y)
						}
					}
					if len(v) < n/2+1 {
						t.Errorf("majorities-ring n=%d: %s sees %v, not a majority", n, x, v)
					}
					if views[strings.Join(v, ",")] {
						t.Errorf("majorities-ring n=%d: two nodes see %v", n, v)
					}
					views[strings.Join(v, ",")] = true
					for _, c := range clients {
						if !reach(cuts, c, x) {
							t.Errorf("majorities-ring cut client %s from %s", c, x)
						}
					}
				}
			}

			// client-isolate: one client loses some nodes; nodes keep each
			// other.
			cuts, _ = ShapeCuts("client-isolate", nodes, clients, nil, seeded(seed, 1))
			if len(cuts) != 1 || len(cuts[0].A) != 1 || !strings.HasPrefix(cuts[0].A[0], "c") || len(cuts[0].B) == 0 {
				t.Errorf("client-isolate: %v", cuts)
			}
			for _, x := range nodes {
				for _, y := range nodes {
					if !reach(cuts, x, y) {
						t.Errorf("client-isolate cut %s from %s", x, y)
					}
				}
			}
		}
	}
	if _, err := ShapeCuts("partition", nil, nil, [][]string{{"n1"}}, nil); err == nil {
		t.Error("partition with one group accepted")
	}
	cuts, err := ShapeCuts("partition", nil, nil, [][]string{{"n1", "c0"}, {"n2"}, {"n3"}}, nil)
	if err != nil || len(cuts) != 3 {
		t.Errorf("partition of three groups: %v, %v", cuts, err)
	}
}

func TestShapesAreSeeded(t *testing.T) {
	nodes := names("n", 5)
	for shape := range shapes {
		if shape == "partition" {
			continue
		}
		a, _ := ShapeCuts(shape, nodes, []string{"c0", "c1"}, nil, seeded(9, 9))
		b, _ := ShapeCuts(shape, nodes, []string{"c0", "c1"}, nil, seeded(9, 9))
		if fmt.Sprint(a) != fmt.Sprint(b) {
			t.Errorf("%s differs for one seed: %v vs %v", shape, a, b)
		}
	}
}

func TestPartitionWithABridgeHost(t *testing.T) {
	// Kleppmann's Redlock case: c0 sees n1,n2,n3 and c1 sees n3,n4,n5.
	cuts, err := ShapeCuts("partition", nil, nil, [][]string{{"n1", "n2", "n3", "c0"}, {"n3", "n4", "n5", "c1"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		x, y string
		want bool
	}{
		{"c0", "n3", true}, {"c1", "n3", true}, {"c0", "n1", true}, {"c1", "n5", true},
		{"c0", "n4", false}, {"c0", "n5", false}, {"c1", "n1", false}, {"n2", "n4", false},
	} {
		if got := reach(cuts, tt.x, tt.y); got != tt.want {
			t.Errorf("%s–%s reachable %v, want %v (cuts %v)", tt.x, tt.y, got, tt.want, cuts)
		}
	}
	if _, err := ShapeCuts("partition", nil, nil, [][]string{{"n1", "n2"}, {"n1"}}, nil); err == nil {
		t.Error("a partition that cuts nothing was accepted")
	}
}

func TestNetworkFaultsInjectAndHeal(t *testing.T) {
	net := &fakeNet{}
	env := Env{Cluster: &fakeCluster{nodes: nodes("n1", "n2", "n3")}, Net: net,
		ClientHosts: []string{"c0"}}.With(Window.Is(time.Second), Loss.Is(0.25))
	for _, name := range []string{"isolate", "halves", "bridge", "client-isolate", "reply-loss", "loss"} {
		before := len(net.log())
		f := buildOne(t, name, env)
		v, err := f.Inject(context.Background(), testRng())
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(v.Targets) == 0 {
			t.Errorf("%s recorded no targets", name)
		}
		if _, err := f.Heal(context.Background()); err != nil {
			t.Fatal(err)
		}
		if calls := net.log()[before:]; len(calls) < 2 || calls[len(calls)-1] != "heal" {
			t.Errorf("%s: calls %v, want cuts then heal", name, calls)
		}
	}
	// Without namespaces, every network fault is unavailable with the reason.
	for _, name := range []string{"isolate", "loss", "partition"} {
		_, err := Build([]string{name}, Env{Cluster: env.Cluster, NetReason: "not root"}.With(Window.Is(time.Second)))
		if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "not root") {
			t.Errorf("%s without a network: %v", name, err)
		}
	}
	if _, err := Build([]string{"majorities-ring"}, env); err == nil {
		t.Error("majorities-ring on 3 nodes built")
	}
	// An explicit grouping must name hosts the run has.
	env = env.With(Partition.Is([][]string{{"n1", "c0"}, {"n9"}}))
	if _, err := Build([]string{"partition"}, env); err == nil || !strings.Contains(err.Error(), `"n9"`) {
		t.Errorf("partition naming n9: %v", err)
	}
	env = env.With(Partition.Is([][]string{{"n1", "c0"}, {"n2", "n3"}}))
	if _, err := Build([]string{"partition"}, env); err != nil {
		t.Errorf("partition n1,c0/n2,n3: %v", err)
	}
}

func TestClockFaults(t *testing.T) {
	clocks := &fakeClocks{}
	env := Env{Cluster: &fakeCluster{nodes: nodes("n1", "n2")}, Clocks: clocks}.With(Window.Is(time.Second), ClockBump.Is(time.Minute), Strobe.Is(time.Millisecond))
	f := buildOne(t, "clock-bump", env)
	v, err := f.Inject(context.Background(), testRng())
	if err != nil {
		t.Fatal(err)
	}
	moved := 0
	for _, n := range []string{"n1", "n2"} {
		if o := clocks.Offset(n); o == time.Minute || o == -time.Minute {
			moved++
		}
	}
	if moved != 1 {
		t.Errorf("clock-bump moved %d nodes (%v), want 1", moved, clocks.off)
	}
	if time.Duration(v.Duration).Abs() != time.Minute {
		t.Errorf("clock-bump recorded offset %v", time.Duration(v.Duration))
	}
	f.Heal(context.Background())
	if clocks.Offset("n1") != 0 || clocks.Offset("n2") != 0 {
		t.Errorf("clock-bump heal left %v", clocks.off)
	}
	// The heal restores the offset a node had before, not zero.
	clocks.Set("n1", 5*time.Second)
	clocks.Set("n2", 5*time.Second)
	f.Inject(context.Background(), testRng())
	f.Heal(context.Background())
	if clocks.Offset("n1") != 5*time.Second || clocks.Offset("n2") != 5*time.Second {
		t.Errorf("clock-bump heal from 5s left %v, want 5s", clocks.off)
	}
	clocks.Set("n1", 0)
	clocks.Set("n2", 0)

	s := buildOne(t, "clock-strobe", env)
	if _, err := s.Inject(context.Background(), testRng()); err != nil {
		t.Fatal(err)
	}
	seen := map[time.Duration]bool{}
	deadline := time.Now().Add(5 * time.Second)
	for len(seen) < 2 && time.Now().Before(deadline) {
		seen[clocks.Offset("n1")+clocks.Offset("n2")] = true
		time.Sleep(100 * time.Microsecond)
	}
	if !seen[0] || !seen[time.Minute] {
		t.Errorf("clock-strobe offsets seen: %v, want 0 and 1m", seen)
	}
	s.Heal(context.Background())
	if clocks.Offset("n1") != 0 || clocks.Offset("n2") != 0 {
		t.Errorf("clock-strobe heal left %v", clocks.off)
	}

	clocks.Set("n2", time.Hour)
	r := buildOne(t, "clock-reset", env)
	v, _ = r.Inject(context.Background(), testRng())
	if clocks.Offset("n2") != 0 || !slices.Equal(v.Targets, []string{"n2"}) {
		t.Errorf("clock-reset: offsets %v, targets %v", clocks.off, v.Targets)
	}

	_, err = Build([]string{"clock-bump"}, Env{Cluster: env.Cluster,
		ClockReason: "etcd members are Go programs: the shim cannot move their clocks"}.With(Window.Is(time.Second), ClockBump.Is(time.Second)))
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "etcd") {
		t.Errorf("clock-bump without clocks: %v", err)
	}
}

// TestSharedClientAddressRefusesClientCuts checks that a network whose
// clients share one address makes the faults that need to tell clients
// apart unavailable, with its reason, and leaves the others, and a
// partition that keeps every client on one side, available.
func TestSharedClientAddressRefusesClientCuts(t *testing.T) {
	cl := &fakeCluster{nodes: nodes("n1", "n2", "n3")}
	for _, tc := range []struct {
		fault  string
		groups [][]string
		want   string // "" for available
	}{
		{"halves", nil, "fault halves: fault unavailable: every client is behind one address"},
		{"bridge", nil, "fault bridge: fault unavailable: every client is behind one address"},
		{"client-isolate", nil, "fault client-isolate: fault unavailable: every client is behind one address"},
		{"reply-loss", nil, "fault reply-loss: fault unavailable: every client is behind one address"},
		{"partition", [][]string{{"n1", "c0"}, {"n2", "n3", "c1"}}, "fault partition: fault unavailable: --partition puts clients in 2 groups; every client is behind one address"},
		{"partition", [][]string{{"n1"}, {"n2", "n3", "c0", "c1"}}, ""},
		{"isolate", nil, ""},
		{"loss", nil, ""},
	} {
		for _, net := range []Network{&sharedNet{}, &fakeNet{}} {
			env := Env{Cluster: cl, Net: net, ClientHosts: []string{"c0", "c1"}}.With(Window.Is(time.Second), Loss.Is(0.5), Partition.Is(tc.groups))
			_, err := Build([]string{tc.fault}, env)
			want := tc.want
			if _, shared := net.(*sharedNet); !shared {
				want = ""
			}
			switch {
			case want == "" && err != nil:
				t.Errorf("%s on %T: %v, want it available", tc.fault, net, err)
			case want != "" && (err == nil || err.Error() != want || !errors.Is(err, ErrUnavailable)):
				t.Errorf("%s on %T: %v, want %q", tc.fault, net, err, want)
			}
		}
	}
}

// TestPointFaultsHitTheFirstWorkerThere: a fault at a pause point hits the
// first of its candidates to reach the point, not a worker drawn in
// advance that may starve for the whole run, and disarms the others; with
// pins only the pinned workers are candidates, and when none gets there
// every armed worker is disarmed and nothing is hit.
func TestPointFaultsHitTheFirstWorkerThere(t *testing.T) {
	for _, tc := range []struct {
		name      string
		starving  map[int]bool
		pins      []string
		wantErr   bool
		wantHit   string
		wantCalls []string // sorted: the waits run at once
	}{
		{name: "the one worker that gets there", starving: map[int]bool{1: true, 3: true}, wantHit: "p2",
			wantCalls: []string{"SIGSTOP p2", "arm p1 after-acquire", "arm p2 after-acquire", "arm p3 after-acquire",
				"disarm p1", "disarm p3", "wait p1", "wait p2", "wait p3"}},
		{name: "pinned to a starving worker", starving: map[int]bool{1: true, 3: true}, pins: []string{"p1"}, wantErr: true,
			wantCalls: []string{"arm p1 after-acquire", "disarm p1", "wait p1"}},
		{name: "nobody gets there", starving: map[int]bool{1: true, 2: true, 3: true}, wantErr: true,
			wantCalls: []string{"arm p1 after-acquire", "arm p2 after-acquire", "arm p3 after-acquire",
				"disarm p1", "disarm p2", "disarm p3", "wait p1", "wait p2", "wait p3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool := &fakeClients{procs: []int{1, 2, 3}, starving: tc.starving}
			env := Env{Clients: pool}.With(Pause.Is(time.Second), PausePoint.Is("after-acquire"))
			if tc.pins != nil {
				env.Targets = map[string][]string{"pause-client": tc.pins}
			}
			f := buildOne(t, "pause-client", env)
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			v, err := f.Inject(ctx, testRng())
			calls := pool.log()
			slices.Sort(calls)
			if !slices.Equal(calls, tc.wantCalls) {
				t.Errorf("calls %q, want %q", calls, tc.wantCalls)
			}
			if v.Point != "after-acquire" {
				t.Errorf("recorded point %q, want after-acquire", v.Point)
			}
			if tc.wantErr {
				if !errors.Is(err, errNotApplied) || len(v.Targets) != 0 {
					t.Errorf("Inject = %+v, %v; want no target and an error that wraps errNotApplied", v, err)
				}
				return
			}
			if err != nil || !slices.Equal(v.Targets, []string{tc.wantHit}) {
				t.Errorf("Inject = %+v, %v; want target %s", v, err, tc.wantHit)
			}
		})
	}
}
