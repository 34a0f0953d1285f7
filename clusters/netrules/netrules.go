// Package netrules plans the iptables rules of a network fault as data:
// given the hosts of a run, their addresses and where each host's rules
// go, it turns a partition (both ways, or one way only) or a packet loss
// into the DROP rules each place takes, and renders them the two ways the
// providers apply them. It runs nothing: each provider keeps only its
// applier, which runs the rendered rules in a network namespace
// (clusters/local/netns), in a container's namespace (clusters/docker) or
// on a host over SSH (clusters/ssh).
//
// A place is where rules go: a namespace, a container, a machine. A host
// is what a fault names (a node, a client host); several hosts may share
// one place (nodes on one SSH host), and a host may have none (a client on
// the machine that runs the driver), in which case its pairs are cut at
// the place of the host on the other side.
//
// The two renderings:
//   - In chains of their own (Restore, Setup, Flush): the rules are
//     appended to LOCKTEST-IN and LOCKTEST-OUT, which INPUT and OUTPUT
//     jump to, in one iptables-restore that adds all or none; a heal
//     flushes the two chains. The local and docker providers own their
//     places, so nothing else uses these chains.
//   - Inserted into INPUT and OUTPUT with a comment (Insert, Remove): each
//     rule carries the run's tag, locktest:<run id>, so a heal or a later
//     cleanup finds them on a machine that is not the run's own, and an
//     ACCEPT of the SSH port stays above them.
package netrules

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Host is one host of the network a fault is planned on.
type Host struct {
	// Name is the name a fault gives the host: "n1", "c0".
	Name string
	// Addr is the address the rules at other places match for this host.
	Addr string
	// On names the place that takes this host's rules (a namespace, a
	// container, a machine), "" for a host that takes none: its pairs are
	// cut at the other host's place.
	On string
	// Port, when not 0, is the TCP port at which the hosts without a place
	// reach this one: a rule of its place that cuts it from such a host
	// matches that port only, which spares the other hosts of the place.
	Port int
	// Seen, for a host without a place, gives the address each place (by
	// On) sees it at where that is not Addr: the machine the driver runs
	// on, as each SSH host sees it. Such a host's loss falls on each
	// place's Port only, which spares the driver's other traffic (SSH).
	Seen map[string]string
}

// addrAt returns the address rules at place on match for h.
func (h Host) addrAt(on string) string {
	if a, ok := h.Seen[on]; ok {
		return a
	}
	return h.Addr
}

// Rule is one DROP rule at a place, for the packets it matches.
type Rule struct {
	// Out makes the rule one of OUTPUT, matching a packet's destination;
	// else it is one of INPUT, matching the source.
	Out bool
	// Peer is the address at the other end, "" any.
	Peer string
	// Iface is the interface the packet crosses, "" any.
	Iface string
	// Port is the place's own TCP port the packet uses, 0 any.
	Port int
	// Prob, when above 0, drops only that fraction of the packets, at
	// random.
	Prob float64
}

// Spec returns the rule's match as iptables takes it, without chain or
// target: "-s 10.77.3.2 -p tcp --dport 6379".
func (r Rule) Spec() string {
	var f []string
	peer, iface, port := "-s", "-i", "--dport"
	if r.Out {
		peer, iface, port = "-d", "-o", "--sport"
	}
	if r.Peer != "" {
		f = append(f, peer, r.Peer)
	}
	if r.Iface != "" {
		f = append(f, iface, r.Iface)
	}
	if r.Port != 0 {
		f = append(f, "-p", "tcp", port, strconv.Itoa(r.Port))
	}
	if r.Prob > 0 {
		f = append(f, "-m", "statistic", "--mode", "random", "--probability", strconv.FormatFloat(r.Prob, 'f', 4, 64))
	}
	return strings.Join(f, " ")
}

// Rules are the rules of one place, each once, in the order planned.
type Rules struct {
	On    string
	Rules []Rule
}

// Plan is a fault's rules, a place at a time, in the order the places
// first appear among the hosts the plan was made for. A place without
// rules is left out.
type Plan []Rules

// Of returns the rules of place on.
func (p Plan) Of(on string) []Rule {
	for _, r := range p {
		if r.On == on {
			return r.Rules
		}
	}
	return nil
}

// planner gathers rules by place.
type planner struct {
	hosts []Host
	rules map[string][]Rule
}

func newPlanner(hosts []Host) *planner { return &planner{hosts: hosts, rules: map[string][]Rule{}} }

func (p *planner) add(on string, rs ...Rule) {
	for _, r := range rs {
		if !slices.Contains(p.rules[on], r) {
			p.rules[on] = append(p.rules[on], r)
		}
	}
}

func (p *planner) plan() Plan {
	var out Plan
	for _, h := range p.hosts {
		if rs, ok := p.rules[h.On]; ok && h.On != "" {
			out = append(out, Rules{On: h.On, Rules: rs})
			delete(p.rules, h.On)
		}
	}
	return out
}

func (p *planner) find(name string) (Host, error) {
	for _, h := range p.hosts {
		if h.Name == name {
			return h, nil
		}
	}
	return Host{}, fmt.Errorf("no host %s", name)
}

// SharedError is why a fault cannot be made with rules at a place that
// several hosts share: a rule there falls on every host of the place.
type SharedError struct {
	// Host is the host the fault names, at place On.
	Host, On string
	// Other is the host of the same place the rule would also hit.
	Other string
	// Peer is the host Host is cut from; "" for a loss.
	Peer string
	// Apart says that Other is in another group than Host's: the two
	// would have to be cut apart at their one place.
	Apart bool
}

func (e *SharedError) Error() string {
	switch {
	case e.Peer == "":
		return fmt.Sprintf("cannot make %s lossy: %s also holds %s", e.Host, e.On, e.Other)
	case e.Apart:
		return fmt.Sprintf("cannot cut %s from %s: both are at %s", e.Host, e.Other, e.On)
	}
	return fmt.Sprintf("cannot cut %s from %s: %s also holds %s, which is in no group", e.Host, e.Peer, e.On, e.Other)
}

// Partition plans the rules that cut every pair of hosts in different
// groups, both ways; hosts in no group are not affected. A pair is cut at
// each of its hosts' places: INPUT drops what comes from the other host's
// address, OUTPUT what goes to it. Where the other host has no place, the
// rules match only the host's Port, if it has one. A pair of hosts that
// both have a place cannot be cut where another host of either place is
// in another group or in none (SharedError). A name that is in no host is
// an error.
func Partition(hosts []Host, groups [][]string) (Plan, error) {
	return cutGroups(hosts, groups, false)
}

// OneWay plans the rules that drop every packet from a host of from to a
// host of to, and nothing the other way: the replies of to's requests are
// lost, while its requests arrive. Each pair is cut at both of its hosts'
// places, as Partition cuts it, but only in its one direction: OUTPUT
// drops what the host of from sends to the other's address, INPUT what
// the host of to receives from it. A host without a place, a port and a
// place several hosts share are as in Partition.
func OneWay(hosts []Host, from, to []string) (Plan, error) {
	return cutGroups(hosts, [][]string{from, to}, true)
}

// cutGroups plans the cuts between every pair of hosts in different
// groups: both ways, or, with oneWay, only from the hosts of groups[0] to
// those of groups[1] (the only groups there are then).
func cutGroups(hosts []Host, groups [][]string, oneWay bool) (Plan, error) {
	p := newPlanner(hosts)
	hs := make([][]Host, len(groups))
	for i, g := range groups {
		for _, n := range g {
			h, err := p.find(n)
			if err != nil {
				return nil, err
			}
			hs[i] = append(hs[i], h)
		}
	}
	group := func(name string) int {
		for i, g := range groups {
			if slices.Contains(g, name) {
				return i
			}
		}
		return -1
	}
	// alone says why h, in group g, cannot be cut from peer at its place.
	alone := func(h Host, g int, peer string) error {
		for _, m := range hosts {
			if m.On != h.On || m.Name == h.Name || group(m.Name) == g {
				continue
			}
			return &SharedError{Host: h.Name, On: h.On, Other: m.Name, Peer: peer, Apart: group(m.Name) >= 0}
		}
		return nil
	}
	// cut makes the rules at x's place that drop what x receives from y
	// (in) and what it sends to y (out).
	cut := func(x, y Host, gx, gy int, in, out bool) error {
		if x.Name == y.Name || x.On == "" {
			return nil
		}
		port := x.Port
		if y.On != "" {
			if err := alone(x, gx, y.Name); err != nil {
				return err
			}
			if err := alone(y, gy, x.Name); err != nil {
				return err
			}
			port = 0
		}
		a := y.addrAt(x.On)
		if in {
			p.add(x.On, Rule{Peer: a, Port: port})
		}
		if out {
			p.add(x.On, Rule{Out: true, Peer: a, Port: port})
		}
		return nil
	}
	for i := range hs {
		for j := i + 1; j < len(hs); j++ {
			for _, x := range hs[i] {
				for _, y := range hs[j] {
					if err := cut(x, y, i, j, !oneWay, true); err != nil {
						return nil, err
					}
					if err := cut(y, x, j, i, true, !oneWay); err != nil {
						return nil, err
					}
				}
			}
		}
	}
	return p.plan(), nil
}

// LossShape is how a provider's loss falls at a host's place.
type LossShape struct {
	// Iface limits the loss to the packets that arrive on this interface.
	Iface string
	// Both makes the loss fall on the packets that leave too, not only on
	// those that arrive.
	Both bool
}

// Loss plans the rules that drop the fraction p of the packets of each
// named host, as shape says. A host with a place loses them there, and
// every other host of that place must be named too (SharedError). A host
// without one loses its traffic with every host that has a place, at
// those places: by its address, or where the places see it at addresses
// of their own (Seen), on each place's Port only.
func Loss(hosts []Host, names []string, prob float64, shape LossShape) (Plan, error) {
	p := newPlanner(hosts)
	drop := func(on, peer string, port int) {
		p.add(on, Rule{Peer: peer, Iface: shape.Iface, Port: port, Prob: prob})
		if shape.Both {
			p.add(on, Rule{Out: true, Peer: peer, Port: port, Prob: prob})
		}
	}
	var seen []Host // hosts without a place that places see apart
	for _, n := range names {
		h, err := p.find(n)
		if err != nil {
			return nil, err
		}
		if h.On != "" {
			for _, m := range hosts {
				if m.On == h.On && !slices.Contains(names, m.Name) {
					return nil, &SharedError{Host: h.Name, On: h.On, Other: m.Name}
				}
			}
			drop(h.On, "", 0)
			continue
		}
		if h.Seen != nil {
			seen = append(seen, h)
			continue
		}
		for _, m := range hosts {
			if m.On != "" {
				drop(m.On, h.Addr, 0)
			}
		}
	}
	for _, h := range seen {
		for _, m := range hosts {
			if m.On != "" {
				drop(m.On, h.addrAt(m.On), m.Port)
			}
		}
	}
	return p.plan(), nil
}
