package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// reach says whether hosts x and y can talk under cuts.
func reach(cuts []Cut, x, y string) bool {
	for _, c := range cuts {
		if (slices.Contains(c.A, x) && slices.Contains(c.B, y)) || (slices.Contains(c.A, y) && slices.Contains(c.B, x)) {
			return false
		}
	}
	return true
}

func TestShapes(t *testing.T) {
	clients := []string{"c0", "c1", "c2"}
	for seed := uint64(0); seed < 50; seed++ {
		for _, n := range []int{3, 5, 7} {
			nodes := names("n", n)
			rng := func() *rand.Rand { return rand.New(rand.NewPCG(seed, 1)) }

			// isolate: exactly one node reaches no one; everyone else
			// reaches everyone else.
			cuts, err := ShapeCuts("isolate", nodes, clients, nil, rng())
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
			cuts, _ = ShapeCuts("halves", nodes, clients, nil, rng())
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
			cuts, _ = ShapeCuts("bridge", nodes, clients, nil, rng())
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
			cuts, err = ShapeCuts("majorities-ring", nodes, clients, nil, rng())
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
			cuts, _ = ShapeCuts("client-isolate", nodes, clients, nil, rng())
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
		a, _ := ShapeCuts(shape, nodes, []string{"c0", "c1"}, nil, rand.New(rand.NewPCG(9, 9)))
		b, _ := ShapeCuts(shape, nodes, []string{"c0", "c1"}, nil, rand.New(rand.NewPCG(9, 9)))
		if fmt.Sprint(a) != fmt.Sprint(b) {
			t.Errorf("%s differs for one seed: %v vs %v", shape, a, b)
		}
	}
}

func TestNetworkFaultsInjectAndHeal(t *testing.T) {
	net := &fakeNet{}
	env := Env{Cluster: &fakeCluster{nodes: nodes("n1", "n2", "n3")}, Net: net, Window: time.Second,
		ClientHosts: []string{"c0"}, Loss: 0.25}
	for _, name := range []string{"isolate", "halves", "bridge", "client-isolate", "loss"} {
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
		_, err := Build([]string{name}, Env{Cluster: env.Cluster, Window: time.Second, NetReason: "not root"})
		if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "not root") {
			t.Errorf("%s without a network: %v", name, err)
		}
	}
	if _, err := Build([]string{"majorities-ring"}, env); err == nil {
		t.Error("majorities-ring on 3 nodes built")
	}
	// An explicit grouping must name hosts the run has.
	env.Groups = [][]string{{"n1", "c0"}, {"n9"}}
	if _, err := Build([]string{"partition"}, env); err == nil || !strings.Contains(err.Error(), `"n9"`) {
		t.Errorf("partition naming n9: %v", err)
	}
	env.Groups = [][]string{{"n1", "c0"}, {"n2", "n3"}}
	if _, err := Build([]string{"partition"}, env); err != nil {
		t.Errorf("partition n1,c0/n2,n3: %v", err)
	}
}

func TestClockFaults(t *testing.T) {
	clocks := &fakeClocks{}
	env := Env{Cluster: &fakeCluster{nodes: nodes("n1", "n2")}, Clocks: clocks, Window: time.Second,
		ClockBump: time.Minute, StrobeRate: time.Millisecond}
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

	_, err = Build([]string{"clock-bump"}, Env{Cluster: env.Cluster, Window: time.Second, ClockBump: time.Second,
		ClockReason: "etcd members are Go programs: the shim cannot move their clocks"})
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
		{"partition", [][]string{{"n1", "c0"}, {"n2", "n3", "c1"}}, "fault partition: fault unavailable: --partition puts clients in 2 groups; every client is behind one address"},
		{"partition", [][]string{{"n1"}, {"n2", "n3", "c0", "c1"}}, ""},
		{"isolate", nil, ""},
		{"loss", nil, ""},
	} {
		for _, net := range []Network{&sharedNet{}, &fakeNet{}} {
			env := Env{Cluster: cl, Net: net, Window: time.Second, ClientHosts: []string{"c0", "c1"}, Loss: 0.5, Groups: tc.groups}
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
