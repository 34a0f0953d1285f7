package netns

import (
	"context"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/locktest/locktest/clusters/netrules"
)

// madeState is a hand-built lab of one node host and one client host, as
// Record would find it.
func madeState() State {
	rules := []string{"-P INPUT ACCEPT", "-P FORWARD ACCEPT", "-P OUTPUT ACCEPT", "-N LT-IN", "-N LT-OUT", "-A INPUT -j LT-IN", "-A OUTPUT -j LT-OUT"}
	return State{Bridge: true, Forward: true, Hosts: map[string]HostState{
		"h1": {Veth: true, Addr: "10.77.0.2/24", Rules: slices.Clone(rules)},
		"c0": {Veth: true, Addr: "10.77.0.3/24", Rules: slices.Clone(rules)},
	}}
}

// TestDifferencesFindWhatARunLeft checks the proof that a lab is as made
// on hand-built states: the lab as made has no difference, and each thing
// a run may leave (a fault's rule in any chain, a rule gone, rules out of
// order, a veth, eth0, bridge or FORWARD rule gone, a process in a
// client host, a host more or less) is one, named.
func TestDifferencesFindWhatARunLeft(t *testing.T) {
	if d := Differences(madeState(), madeState(), []string{"c0"}); len(d) > 0 {
		t.Fatalf("the lab as made differs from itself: %q", d)
	}
	// A node host may run its node.
	now := madeState()
	h := now.Hosts["h1"]
	h.Procs = []string{"123"}
	now.Hosts["h1"] = h
	if d := Differences(madeState(), now, []string{"c0"}); len(d) > 0 {
		t.Errorf("a node host running its node differs: %q", d)
	}
	for _, tt := range []struct {
		name string
		edit func(*State)
		want string
	}{
		{"a partition's rule left", func(s *State) {
			h := s.Hosts["h1"]
			h.Rules = append(h.Rules, "-A LT-IN -s 10.77.0.3/32 -j DROP")
			s.Hosts["h1"] = h
		}, "host h1: iptables rule not in the lab as made: -A LT-IN -s 10.77.0.3/32 -j DROP"},
		{"a rule in a chain the faults do not use", func(s *State) {
			h := s.Hosts["c0"]
			h.Rules = append(h.Rules, "-A OUTPUT -j DROP")
			s.Hosts["c0"] = h
		}, "host c0: iptables rule not in the lab as made: -A OUTPUT -j DROP"},
		{"a rule of the lab as made twice", func(s *State) {
			h := s.Hosts["h1"]
			h.Rules = append(h.Rules, "-A INPUT -j LT-IN")
			s.Hosts["h1"] = h
		}, "not in the lab as made: -A INPUT -j LT-IN"},
		{"a jump gone", func(s *State) {
			h := s.Hosts["h1"]
			h.Rules = slices.DeleteFunc(h.Rules, func(r string) bool { return r == "-A OUTPUT -j LT-OUT" })
			s.Hosts["h1"] = h
		}, "host h1: iptables rule of the lab as made is gone: -A OUTPUT -j LT-OUT"},
		{"rules out of order", func(s *State) {
			h := s.Hosts["h1"]
			r := h.Rules
			r[5], r[6] = r[6], r[5]
			s.Hosts["h1"] = h
		}, "in another order"},
		{"a policy changed", func(s *State) {
			h := s.Hosts["h1"]
			h.Rules[0] = "-P INPUT DROP"
			s.Hosts["h1"] = h
		}, "-P INPUT DROP"},
		{"a veth gone", func(s *State) {
			h := s.Hosts["c0"]
			h.Veth = false
			s.Hosts["c0"] = h
		}, "host c0: its veth"},
		{"eth0 down or without its address", func(s *State) {
			h := s.Hosts["h1"]
			h.Addr = ""
			s.Hosts["h1"] = h
		}, "host h1: eth0 is up with address \"\""},
		{"the bridge gone", func(s *State) { s.Bridge = false }, "bridge"},
		{"the FORWARD rule gone", func(s *State) { s.Forward = false }, "FORWARD"},
		{"a worker left in a client host", func(s *State) {
			h := s.Hosts["c0"]
			h.Procs = []string{"4242"}
			s.Hosts["c0"] = h
		}, "host c0: processes 4242"},
		{"a host gone", func(s *State) { delete(s.Hosts, "c0") }, "host c0: not read"},
		{"a host more", func(s *State) { s.Hosts["c1"] = s.Hosts["c0"] }, "host c1: not in the lab as made"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			now := madeState()
			tt.edit(&now)
			d := Differences(madeState(), now, []string{"c0"})
			if !slices.ContainsFunc(d, func(s string) bool { return strings.Contains(s, tt.want) }) {
				t.Errorf("differences %q, want one with %q", d, tt.want)
			}
		})
	}
}

// TestParseLink reads lines of `ip -o link show`.
func TestParseLink(t *testing.T) {
	for _, tt := range []struct {
		line, name, master string
		up                 bool
	}{
		{"12: lt1a2bh1@if11: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc noqueue master lt1a2b state UP mode DEFAULT", "lt1a2bh1", "lt1a2b", true},
		{"10: lt1a2b: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc noqueue state UP mode DEFAULT", "lt1a2b", "", true},
		{"13: lt1a2bc0@if12: <BROADCAST,MULTICAST> mtu 1500 qdisc noop master lt1a2b state DOWN", "lt1a2bc0", "lt1a2b", false},
		{"    link/ether 2a:1b:00:00:00:01 brd ff:ff:ff:ff:ff:ff", "", "", false},
	} {
		name, up, master := parseLink(tt.line)
		if name != tt.name || up != tt.up || master != tt.master {
			t.Errorf("parseLink(%q) = %q, %v, %q; want %q, %v, %q", tt.line, name, up, master, tt.name, tt.up, tt.master)
		}
	}
}

// TestAsMadeOnARealLab makes a lab, records it, and proves it as made;
// then a partition the lab itself puts in and heals leaves it as made; a
// rule put in by hand, which the lab's Heal does not know of, makes it
// differ, naming the rule; a veth taken down too. Close removes it all.
func TestAsMadeOnARealLab(t *testing.T) {
	ctx := context.Background()
	lab := testLab(t)
	if err := lab.AsMade(ctx, nil); err == nil {
		t.Errorf("a lab never recorded is proven as made")
	}
	var hosts []Host
	for _, n := range []string{"h1", "h2", "c0"} {
		h, err := lab.Add(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		hosts = append(hosts, h)
	}
	if err := lab.Record(ctx); err != nil {
		t.Fatal(err)
	}
	if err := lab.AsMade(ctx, []string{"c0"}); err != nil {
		t.Fatalf("the lab just recorded: %v", err)
	}
	if err := lab.Partition(ctx, [][]string{{"h1"}, {"h2", "c0"}}); err != nil {
		t.Fatal(err)
	}
	if err := lab.AsMade(ctx, []string{"c0"}); err == nil || !strings.Contains(err.Error(), "DROP") {
		t.Errorf("a lab under a partition: %v, want its rules named", err)
	}
	if err := lab.Heal(ctx); err != nil {
		t.Fatal(err)
	}
	if err := lab.AsMade(ctx, []string{"c0"}); err != nil {
		t.Errorf("after the heal: %v", err)
	}
	// A rule the lab did not put in: Heal does not flush it, the proof
	// finds it.
	rule := []string{"ip", "netns", "exec", hosts[1].NS, "iptables", "-w", "-A", netrules.ChainIn, "-s", "10.255.255.1/32", "-j", "DROP"}
	if out, err := exec.Command(rule[0], rule[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if err := lab.Heal(ctx); err != nil {
		t.Fatal(err)
	}
	if err := lab.AsMade(ctx, []string{"c0"}); err == nil || !strings.Contains(err.Error(), "10.255.255.1") || !strings.Contains(err.Error(), "host h2") {
		t.Errorf("a rule left by hand: %v, want it named on h2", err)
	}
	if out, err := exec.Command("ip", "link", "set", hosts[0].Veth, "down").CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if err := lab.AsMade(ctx, []string{"c0"}); err == nil || !strings.Contains(err.Error(), "host h1: its veth") {
		t.Errorf("a veth down: %v, want it named", err)
	}
}
