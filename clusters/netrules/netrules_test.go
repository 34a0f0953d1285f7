package netrules

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// fault is one fault planned on a network: a partition when groups is
// set (one way, from the first group to the second, with oneWay), else a
// loss of names.
type fault struct {
	title  string
	groups [][]string
	oneWay bool
	names  []string
	prob   float64
}

// network is a provider's hosts as it hands them to the planner, and how
// it renders and applies their rules.
type network struct {
	hosts  []Host
	render func(on string, rules []Rule) string
	shape  LossShape
}

// chains renders a place's rules as the local and docker providers apply
// them: one iptables-restore into the fault chains.
func chains(_ string, rules []Rule) string { return Restore(Append(rules)) }

// ssh renders them as the ssh provider does for run r1 (ha and hc take
// SSH on port 22, hb on 2222).
func ssh(run string) func(on string, rules []Rule) string {
	return func(on string, rules []Rule) string {
		spare := 22
		if on == "hb" {
			spare = 2222
		}
		return Insert(rules, Tag(run), spare)
	}
}

func (nw network) plan(f fault) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n", f.title)
	var plan Plan
	var err error
	switch {
	case f.oneWay:
		plan, err = OneWay(nw.hosts, f.groups[0], f.groups[1])
	case f.groups != nil:
		plan, err = Partition(nw.hosts, f.groups)
	default:
		plan, err = Loss(nw.hosts, f.names, f.prob, nw.shape)
	}
	if err != nil {
		fmt.Fprintf(&b, "error: %v\n", err)
		return b.String()
	}
	for _, r := range plan {
		fmt.Fprintf(&b, "== %s\n%s", r.On, nw.render(r.On, r.Rules))
	}
	return b.String()
}

// The hosts of each provider's network, as each builds them.
var (
	// local: every host, client hosts too, is a namespace of its own.
	netnsHosts = func() []Host {
		var hs []Host
		for i, n := range []string{"n1", "n2", "n3", "c0", "c1"} {
			hs = append(hs, Host{Name: n, Addr: fmt.Sprintf("10.77.3.%d", i+2), On: n})
		}
		return hs
	}()
	// docker: nodes are containers; the clients run on this host, behind
	// the network's gateway or at addresses of their own.
	dockerNodes = []Host{
		{Name: "n1", Addr: "10.78.5.2", On: "n1"},
		{Name: "n2", Addr: "10.78.5.3", On: "n2"},
		{Name: "n3", Addr: "10.78.5.4", On: "n3"},
	}
	dockerBehindGateway = append(dockerNodes[:3:3], Host{Name: "c0", Addr: "10.78.5.1"}, Host{Name: "c1", Addr: "10.78.5.1"})
	dockerOwn           = append(dockerNodes[:3:3], Host{Name: "c0", Addr: "10.78.5.192"}, Host{Name: "c1", Addr: "10.78.5.193"})
	// ssh: nodes on machines ha, hb, hc, reached at their ports; the
	// control host is 192.168.9.1 to ha and hb, 192.168.8.1 to hc.
	control   = map[string]string{"ha": "192.168.9.1", "hb": "192.168.9.1", "hc": "192.168.8.1"}
	sshNodes  = []Host{{Name: "n1", Addr: "192.168.9.11", On: "ha", Port: 6379}, {Name: "n2", Addr: "192.168.9.12", On: "hb", Port: 6379}, {Name: "n3", Addr: "192.168.9.13", On: "hc", Port: 6380}}
	sshShared = append(sshNodes[:3:3], Host{Name: "c0", Seen: control}, Host{Name: "c1", Seen: control})
	sshOwn    = append(sshNodes[:3:3], Host{Name: "c0", Addr: "10.9.0.5"}, Host{Name: "c1", Addr: "10.9.0.6"})
	// ssh, two nodes on one machine.
	sshTwo = []Host{
		{Name: "n1", Addr: "192.168.9.11", On: "ha", Port: 6379}, {Name: "n2", Addr: "192.168.9.11", On: "ha", Port: 6380},
		{Name: "n3", Addr: "192.168.9.12", On: "hb", Port: 6379}, {Name: "n4", Addr: "192.168.9.13", On: "hc", Port: 6379},
		{Name: "c0", Seen: control},
	}
)

// TestPlansAsTheProvidersApplied plans faults on each provider's hosts and
// compares the rules, rendered as each provider applies them, with the
// goldens: the rules each provider made before they shared this planner,
// recorded from its own code, and the one-way cuts, which only the
// planner makes.
func TestPlansAsTheProvidersApplied(t *testing.T) {
	local := network{hosts: netnsHosts, render: chains, shape: LossShape{Iface: "eth0"}}
	dockerGW := network{hosts: dockerBehindGateway, render: chains, shape: LossShape{Iface: "eth0"}}
	dockerOwnNW := network{hosts: dockerOwn, render: chains, shape: LossShape{Iface: "eth0"}}
	shared := network{hosts: sshShared, render: ssh("r1"), shape: LossShape{Both: true}}
	own := network{hosts: sshOwn, render: ssh("r1"), shape: LossShape{Both: true}}
	two := network{hosts: sshTwo, render: ssh("r2"), shape: LossShape{Both: true}}
	for _, tc := range []struct {
		golden string
		steps  []struct {
			nw network
			f  fault
		}
	}{
		{"netns", steps(
			local, fault{title: "cut c0 | n1", groups: [][]string{{"c0"}, {"n1"}}},
			local, fault{title: "partition c0 n1 | n2", groups: [][]string{{"c0", "n1"}, {"n2"}}},
			local, fault{title: "partition n1 | n2 | n3 c0 c1", groups: [][]string{{"n1"}, {"n2"}, {"n3", "c0", "c1"}}},
			local, fault{title: "loss n2 1", names: []string{"n2"}, prob: 1},
			local, fault{title: "loss n1 c1 0.25", names: []string{"n1", "c1"}, prob: 0.25},
			local, fault{title: "one way n1 n2 n3 > c0", groups: [][]string{{"n1", "n2", "n3"}, {"c0"}}, oneWay: true},
			local, fault{title: "one way c1 > n2", groups: [][]string{{"c1"}, {"n2"}}, oneWay: true},
		)},
		{"docker", steps(
			dockerGW, fault{title: "cut n1 | n2 n3", groups: [][]string{{"n1"}, {"n2", "n3"}}},
			dockerGW, fault{title: "cut c0 | n1, clients behind the gateway", groups: [][]string{{"c0"}, {"n1"}}},
			dockerGW, fault{title: "cut c0 c1 | n1 n2, clients behind the gateway", groups: [][]string{{"c0", "c1"}, {"n1", "n2"}}},
			dockerGW, fault{title: "loss n1 n3 0.5", names: []string{"n1", "n3"}, prob: 0.5},
			dockerOwnNW, fault{title: "cut c1 | n1 n2, clients with own addresses", groups: [][]string{{"c1"}, {"n1", "n2"}}},
			dockerOwnNW, fault{title: "cut n1 c0 | n2 c1, clients with own addresses", groups: [][]string{{"n1", "c0"}, {"n2", "c1"}}},
			dockerOwnNW, fault{title: "one way n1 n2 n3 > c1, clients with own addresses", groups: [][]string{{"n1", "n2", "n3"}, {"c1"}}, oneWay: true},
			dockerOwnNW, fault{title: "one way n1 > n2", groups: [][]string{{"n1"}, {"n2"}}, oneWay: true},
		)},
		{"ssh", steps(
			shared, fault{title: "cut n1 | n2 n3", groups: [][]string{{"n1"}, {"n2", "n3"}}},
			shared, fault{title: "cut c0 | n1 n3, clients behind the control host", groups: [][]string{{"c0"}, {"n1", "n3"}}},
			shared, fault{title: "loss n2 0.1", names: []string{"n2"}, prob: 0.1},
			shared, fault{title: "loss c0 c1 n1 0.3, clients behind the control host", names: []string{"c0", "c1", "n1"}, prob: 0.3},
			shared, fault{title: "cut c9 | n1, clients behind the control host", groups: [][]string{{"c9"}, {"n1"}}},
			shared, fault{title: "cut x | n1", groups: [][]string{{"n1"}, {"x"}}},
			own, fault{title: "cut c0 c1 | n2, clients with own addresses", groups: [][]string{{"c0", "c1"}, {"n2"}}},
			own, fault{title: "loss c1 0.5, clients with own addresses", names: []string{"c1"}, prob: 0.5},
			own, fault{title: "cut c2 | n1, clients with own addresses", groups: [][]string{{"c2"}, {"n1"}}},
			two, fault{title: "shared host: cut n1 n2 | n3 n4", groups: [][]string{{"n1", "n2"}, {"n3", "n4"}}},
			two, fault{title: "shared host: cut n3 n4 | n1 n2", groups: [][]string{{"n3", "n4"}, {"n1", "n2"}}},
			two, fault{title: "shared host: cut n1 | n2", groups: [][]string{{"n1"}, {"n2"}}},
			two, fault{title: "shared host: cut n1 | n3", groups: [][]string{{"n1"}, {"n3"}}},
			two, fault{title: "shared host: cut n3 | n2", groups: [][]string{{"n3"}, {"n2"}}},
			two, fault{title: "shared host: cut c0 | n1", groups: [][]string{{"c0"}, {"n1"}}},
			two, fault{title: "shared host: loss n1 0.2", names: []string{"n1"}, prob: 0.2},
			two, fault{title: "shared host: loss n2 n1 n4 0.2", names: []string{"n2", "n1", "n4"}, prob: 0.2},
			two, fault{title: "shared host: loss c0 0.2", names: []string{"c0"}, prob: 0.2},
			own, fault{title: "one way n1 n2 n3 > c0, clients with own addresses", groups: [][]string{{"n1", "n2", "n3"}, {"c0"}}, oneWay: true},
			shared, fault{title: "one way n1 n3 > c0, clients behind the control host", groups: [][]string{{"n1", "n3"}, {"c0"}}, oneWay: true},
			two, fault{title: "shared host: one way n1 > c0", groups: [][]string{{"n1"}, {"c0"}}, oneWay: true},
			two, fault{title: "shared host: one way n1 > n3", groups: [][]string{{"n1"}, {"n3"}}, oneWay: true},
		)},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			var b strings.Builder
			for _, s := range tc.steps {
				b.WriteString(s.nw.plan(s.f))
			}
			golden(t, tc.golden+".golden", b.String())
		})
	}
}

// steps pairs each network with the fault after it.
func steps(args ...any) []struct {
	nw network
	f  fault
} {
	var out []struct {
		nw network
		f  fault
	}
	for i := 0; i < len(args); i += 2 {
		out = append(out, struct {
			nw network
			f  fault
		}{args[i].(network), args[i+1].(fault)})
	}
	return out
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("%s differs (go test -update to rewrite it); got:\n%s", path, got)
	}
}

// TestRemoveFindsTheRunsRulesByTheirTag: the heal's script deletes the
// rules whose comment holds the run's tag, and its pattern is quoted for
// the shell.
func TestRemoveFindsTheRunsRulesByTheirTag(t *testing.T) {
	var b strings.Builder
	for _, run := range []string{"r1", ""} {
		fmt.Fprintf(&b, "# Remove(Tag(%q))\n%s\n", run, Remove(Tag(run)))
	}
	golden(t, "remove.golden", b.String())
}

// TestSpec: each field of a rule is one match, in the order iptables
// prints them, the direction choosing source or destination.
func TestSpec(t *testing.T) {
	for _, tc := range []struct {
		r    Rule
		want string
	}{
		{Rule{}, ""},
		{Rule{Peer: "10.0.0.2"}, "-s 10.0.0.2"},
		{Rule{Out: true, Peer: "10.0.0.2"}, "-d 10.0.0.2"},
		{Rule{Iface: "eth0", Prob: 0.3}, "-i eth0 -m statistic --mode random --probability 0.3000"},
		{Rule{Out: true, Iface: "eth0"}, "-o eth0"},
		{Rule{Peer: "10.0.0.1", Port: 6379, Prob: 1}, "-s 10.0.0.1 -p tcp --dport 6379 -m statistic --mode random --probability 1.0000"},
		{Rule{Out: true, Peer: "10.0.0.1", Port: 26379}, "-d 10.0.0.1 -p tcp --sport 26379"},
	} {
		if got := tc.r.Spec(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.r, got, tc.want)
		}
	}
}
