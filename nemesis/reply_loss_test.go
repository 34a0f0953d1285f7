package nemesis

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestReplyLossCutsOneWay: reply-loss drops, for its window, the packets
// from the nodes (every node, or the pinned ones) to one client host (the
// pinned one), and none the other way; it records the cut as "from>to"
// and heals the network. A plan's one-way cut replays as a one-way cut.
func TestReplyLossCutsOneWay(t *testing.T) {
	for _, tc := range []struct {
		name string
		pins []string
		want string // the cut made and recorded
	}{
		{"pinned client", []string{"c1"}, "n1,n2,n3>c1"},
		{"pinned client and node", []string{"c0", "n2"}, "n2>c0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			net := &fakeNet{}
			env := Env{Cluster: &fakeCluster{nodes: nodes("n1", "n2", "n3")}, Net: net, ClientHosts: []string{"c0", "c1"},
				Targets: map[string][]string{"reply-loss": tc.pins}}.With(Window.Is(time.Second))
			f := buildOne(t, "reply-loss", env)
			wantKind(t, f, "partition-reply-loss", healNetwork, time.Second)
			v, err := f.Inject(context.Background(), testRng())
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(v.Targets, []string{tc.want}) {
				t.Errorf("recorded targets %v, want [%s]", v.Targets, tc.want)
			}
			if _, err := f.Heal(context.Background()); err != nil {
				t.Fatal(err)
			}
			if calls := net.log(); !slices.Equal(calls, []string{"cut " + tc.want, "heal"}) {
				t.Errorf("network calls %q, want the one-way cut %s, then the heal", calls, tc.want)
			}
		})
	}
	// Unpinned, it picks a client host and cuts every node from it.
	for seed := range uint64(10) {
		cuts, err := ShapeCuts("reply-loss", names("n", 5), []string{"c0", "c1", "c2"}, nil, seeded(seed, 1))
		if err != nil || len(cuts) != 1 || !cuts[0].OneWay || !slices.Equal(cuts[0].A, names("n", 5)) || len(cuts[0].B) != 1 || !strings.HasPrefix(cuts[0].B[0], "c") {
			t.Fatalf("seed %d: cuts %+v, %v; want every node cut one way from one client host", seed, cuts, err)
		}
	}

	// A plan's cut, replayed.
	net := &fakeNet{}
	env := Env{Cluster: &fakeCluster{nodes: nodes("n1", "n2", "n3")}, Net: net, ClientHosts: []string{"c0", "c1"}}.With(Window.Is(time.Second))
	steps, err := BuildPlan(Plan{Faults: []PlannedFault{{Fault: "reply-loss", Cuts: []string{"n1,n3>c1"}}}}, env)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := steps.steps[0].f.Inject(context.Background(), testRng()); err != nil {
		t.Fatal(err)
	}
	if calls := net.log(); !slices.Equal(calls, []string{"cut n1,n3>c1"}) {
		t.Errorf("the replay made %q, want the one-way cut n1,n3>c1", calls)
	}
}

// TestParseCut reads a cut both ways ("a|b") and one way ("a>b"), and
// refuses a cut with a missing side or two separators.
func TestParseCut(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Cut
	}{
		{"n1|n2,n3,c0", Cut{A: []string{"n1"}, B: []string{"n2", "n3", "c0"}}},
		{"n1,n2>c0", Cut{A: []string{"n1", "n2"}, B: []string{"c0"}, OneWay: true}},
	} {
		got, err := parseCut(tc.in)
		if err != nil || !slices.Equal(got.A, tc.want.A) || !slices.Equal(got.B, tc.want.B) || got.OneWay != tc.want.OneWay {
			t.Errorf("parseCut(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
		if d := describe([]Cut{got}); d[0] != tc.in {
			t.Errorf("describe(parseCut(%q)) = %q", tc.in, d[0])
		}
	}
	for _, bad := range []string{"n1", "n1|", ">c0", "n1|n2>c0", "n1>n2|c0", "n1>n2>c0"} {
		if _, err := parseCut(bad); err == nil {
			t.Errorf("parseCut(%q) accepted", bad)
		}
	}
}
