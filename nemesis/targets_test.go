package nemesis

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/history"
)

func TestParseTargets(t *testing.T) {
	tests := []struct {
		in      string
		want    map[string][]string
		wantErr string
	}{
		{in: "", want: map[string][]string{}},
		{in: "clock-bump=n3", want: map[string][]string{"clock-bump": {"n3"}}},
		{in: "kill-node=master; pause-client=p0,p1", want: map[string][]string{"kill-node": {"master"}, "pause-client": {"p0", "p1"}}},
		{in: "clock-bump", wantErr: "want fault=target"},
		{in: "bogus=n1", wantErr: `unknown fault "bogus"`},
	}
	for _, tt := range tests {
		got, err := ParseTargets(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseTargets(%q) error %v, want %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || len(got) != len(tt.want) {
			t.Errorf("ParseTargets(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
			continue
		}
		for k, v := range tt.want {
			if !slices.Equal(got[k], v) {
				t.Errorf("ParseTargets(%q)[%s] = %v, want %v", tt.in, k, got[k], v)
			}
		}
	}
}

func TestPinnedTargets(t *testing.T) {
	nodes := []clusters.Node{{Name: "n1", Role: "master"}, {Name: "n2", Role: "replica"}, {Name: "n3", Role: "replica"}}
	env := Env{Targets: map[string][]string{"kill-node": {"master"}, "clock-bump": {"n3"}, "pause-client": {"p2"}}}
	for seed := uint64(0); seed < 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, 0))
		if n, _, err := env.pickNode(context.Background(), "kill-node", nodes, rng); err != nil || n.Name != "n1" {
			t.Fatalf("kill-node pinned to role master hit %v, %v", n, err)
		}
		if n, _, err := env.pickNode(context.Background(), "clock-bump", nodes, rng); err != nil || n.Name != "n3" {
			t.Fatalf("clock-bump pinned to n3 hit %v, %v", n, err)
		}
		if p, err := env.pickProcess("pause-client", []int{0, 1, 2, 3}, rng); err != nil || p != 2 {
			t.Fatalf("pause-client pinned to p2 hit p%d, %v", p, err)
		}
	}
	// Unpinned faults reach every node.
	seen := map[string]bool{}
	for seed := uint64(0); seed < 50; seed++ {
		n, _, _ := env.pickNode(context.Background(), "pause-node", nodes, rand.New(rand.NewPCG(seed, 0)))
		seen[n.Name] = true
	}
	if len(seen) != 3 {
		t.Errorf("unpinned pause-node hit %v, want all three nodes", seen)
	}
	// A pinned process that is gone: the fault is not applied, never moved
	// to another target.
	if _, err := env.pickProcess("pause-client", []int{0, 1}, rand.New(rand.NewPCG(1, 0))); !errors.Is(err, errNotApplied) {
		t.Errorf("pinned process missing: error %v, want not applied", err)
	}
}

func TestClockDirection(t *testing.T) {
	for _, tt := range []struct {
		dir  string
		bump time.Duration
		want func(time.Duration) bool
	}{
		{ClockForward, time.Second, func(d time.Duration) bool { return d == time.Second }},
		{ClockForward, -time.Second, func(d time.Duration) bool { return d == time.Second }},
		{ClockBackward, time.Second, func(d time.Duration) bool { return d == -time.Second }},
		{ClockEither, -time.Second, func(d time.Duration) bool { return d == -time.Second }},
	} {
		env := Env{ClockBump: tt.bump, ClockDirection: tt.dir}
		for seed := uint64(0); seed < 20; seed++ {
			if d := env.jump(rand.New(rand.NewPCG(seed, 0))); !tt.want(d) {
				t.Errorf("direction %q bump %v: jump %v", tt.dir, tt.bump, d)
			}
		}
	}
	both := map[bool]bool{}
	env := Env{ClockBump: time.Second}
	for seed := uint64(0); seed < 20; seed++ {
		both[env.jump(rand.New(rand.NewPCG(seed, 0))) > 0] = true
	}
	if len(both) != 2 {
		t.Error("either direction never jumped both ways in 20 seeds")
	}
}

// A combined fault goes in part by part, each recorded as its own op, and
// comes out in reverse order; a part that fails stops the rest, and what
// went in is still healed.
func TestCombinedFault(t *testing.T) {
	// Each test stops its schedule from the last heal of a round (onHeal),
	// so that a loaded machine cannot cut a round short.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// b is due 10ms after it went in, a 500ms after: b comes out first
	// unless b went in more than 490ms after a, which even a loaded
	// machine does not take for a 5ms stagger.
	a := &fakeFault{name: "a", duration: 500 * time.Millisecond, onHeal: cancel}
	b := &fakeFault{name: "b", duration: 10 * time.Millisecond}
	s := newSchedule(20*time.Millisecond, 1, &combined{parts: []Fault{a, b}, stagger: 5 * time.Millisecond})
	if err := s.Run(ctx); err != nil {
		t.Fatal(err)
	}
	var seq []string
	for _, o := range s.Recorder.History() {
		if o.Type == history.OK {
			seq = append(seq, o.F)
		}
	}
	if len(seq) < 4 {
		t.Fatalf("ops %v: want at least one whole round", seq)
	}
	for i := 0; i+4 <= len(seq); i += 4 {
		if got := strings.Join(seq[i:i+4], " "); got != "a b heal-b heal-a" {
			t.Fatalf("round %d: %s, want a b heal-b heal-a", i/4, got)
		}
	}
	if ai, ah := a.counts(); ai != ah {
		t.Errorf("a injected %d, healed %d", ai, ah)
	}

	// Each part is healed after its own duration, but not before the last
	// part went in: a partition of 0s comes out first, as soon as the kill
	// that follows it went in; the kill stays its own 300ms.
	ctx3, cancel3 := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel3()
	p := &fakeFault{name: "p", duration: 0}
	k := &fakeFault{name: "k", duration: 300 * time.Millisecond, onHeal: cancel3}
	s = newSchedule(20*time.Millisecond, 1, &combined{parts: []Fault{p, k}, stagger: 10 * time.Millisecond})
	if err := s.Run(ctx3); err != nil {
		t.Fatal(err)
	}
	var ops []history.Op
	for _, o := range s.Recorder.History() {
		if o.Type == history.OK {
			ops = append(ops, o)
		}
	}
	if len(ops) < 4 || ops[0].F+ops[1].F+ops[2].F+ops[3].F != "pkheal-pheal-k" {
		t.Fatalf("ops %v, want p k heal-p heal-k", ops)
	}
	if held := time.Duration(ops[3].Time - ops[1].Time); held < 300*time.Millisecond {
		t.Errorf("k was healed %v after it went in, before its own 300ms", held)
	}
	if ops[2].Time > ops[3].Time {
		t.Errorf("p, of no duration, was healed after k")
	}

	// b fails: c, after it, never goes in; a and b are healed.
	a2 := &fakeFault{name: "a", duration: time.Millisecond}
	b2 := &fakeFault{name: "b", duration: time.Millisecond, injectErr: errors.New("boom")}
	c2 := &fakeFault{name: "c", duration: time.Millisecond}
	s = newSchedule(10*time.Millisecond, 1, &combined{parts: []Fault{a2, b2, c2}})
	ctx2, cancel2 := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel2()
	a2.onHeal = cancel2
	_ = s.Run(ctx2)
	if ci, _ := c2.counts(); ci != 0 {
		t.Errorf("c injected %d times after b failed", ci)
	}
	ai, ah := a2.counts()
	bi, bh := b2.counts()
	if ai == 0 || ai != ah || bi != bh {
		t.Errorf("a %d/%d, b %d/%d injected/healed: every part that went in must be healed", ai, ah, bi, bh)
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

func TestPinnedRoleIsAskedAtThePick(t *testing.T) {
	nodes := []clusters.Node{{Name: "n1", Role: "leader"}, {Name: "n2", Role: "follower"}, {Name: "n3", Role: "follower"}}
	// The leader moved to n3 since the start, and n2 does not answer.
	cl := &liveCluster{fakeCluster: fakeCluster{nodes: nodes}, roles: map[string]string{"n1": "follower", "n3": "leader"}}
	env := Env{Cluster: cl, Targets: map[string][]string{"kill-node": {"leader"}, "pause-node": {"follower"}}}
	for seed := uint64(0); seed < 10; seed++ {
		n, roles, err := env.pickNode(context.Background(), "kill-node", nodes, rand.New(rand.NewPCG(seed, 0)))
		if err != nil || n.Name != "n3" {
			t.Fatalf("kill-node pinned to the leader hit %v, %v; the leader is n3 now", n.Name, err)
		}
		if len(roles) != 1 || roles["n3"] != "leader" {
			t.Fatalf("kill-node pinned to the leader recorded roles %v, want n3=leader", roles)
		}
		// n2 does not answer: its role is unknown, so only n1 is a
		// follower now.
		if n, roles, _ := env.pickNode(context.Background(), "pause-node", nodes, rand.New(rand.NewPCG(seed, 0))); n.Name != "n1" || roles["n1"] != "follower" {
			t.Fatalf("pause-node pinned to followers hit %s (roles %v), want n1, the one follower that answers", n.Name, roles)
		}
	}
	if nodes[0].Role != "leader" {
		t.Error("pickNode changed its caller's nodes")
	}
	// No node has the pinned role now: nothing is hit, and the error says
	// what each node was.
	env.Targets = map[string][]string{"kill-node": {"observer"}}
	if _, _, err := env.pickNode(context.Background(), "kill-node", nodes, rand.New(rand.NewPCG(1, 0))); !errors.Is(err, errNotApplied) ||
		!strings.Contains(err.Error(), "n1=follower n2=? n3=leader") {
		t.Errorf("pin matching no node now: %v, want not applied naming the roles read", err)
	}
}
