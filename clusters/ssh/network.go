package ssh

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/locktest/locktest/clusters/netrules"
)

// Network makes the nemesis's network faults with iptables rules on the
// node hosts, each carrying the comment locktest:<run id>. Hosts are named
// as the nemesis names them: nodes by name, client hosts c0, c1, ... The
// clients all run on the control host. With client addresses, client host
// cK is the K-th of them (its processes' connections leave the control
// host from it, see package clusters/clientaddr). Without, every client
// host stands for the control host's address as each node host sees it.
// A cut of a node and a client host drops that address on the node's own
// port only, which is exact also on a host of several nodes. SSH to the
// hosts is never
// cut: loss spares the SSH port, and the SSH port's ACCEPT stays above
// every DROP. A rule on a host's address hits every node of that host, so
// a cut between nodes or a loss that would hit a node it does not name
// (two nodes of one host on two sides of a cut, or a node on neither side
// beside one that is cut) is an error that says so, and no rule is made. Its methods are safe
// for concurrent use.
type Network struct {
	cl      *Hosts
	conns   []*Conn
	clients []netip.Addr
	// sharedWhy says why clients cannot be told apart, when clients is
	// empty.
	sharedWhy string
	mu        sync.Mutex
}

// Network returns the cluster's network faults over the hosts of conns.
// clients are the client hosts' own addresses, c0's first, or nil when
// they share the control host's; then sharedWhy says why.
func (cl *Hosts) Network(conns []*Conn, clients []netip.Addr, sharedWhy string) *Network {
	return &Network{cl: cl, conns: conns, clients: clients, sharedWhy: sharedWhy}
}

// client returns the address of client host name ("c3"), and whether the
// network has one.
func (nw *Network) client(name string) (netip.Addr, bool, error) {
	k, err := strconv.Atoi(strings.TrimPrefix(name, "c"))
	if !strings.HasPrefix(name, "c") || err != nil || k < 0 {
		return netip.Addr{}, false, fmt.Errorf("ssh network: unknown host %q", name)
	}
	if len(nw.clients) == 0 {
		return netip.Addr{}, false, nil
	}
	if k >= len(nw.clients) {
		return netip.Addr{}, false, fmt.Errorf("ssh network: client host %s has no address (the run has %d)", name, len(nw.clients))
	}
	return nw.clients[k], true, nil
}

// NetworkFaultsReason says why iptables faults cannot be made on the hosts
// of conns (a host without iptables, or without root), or "".
func NetworkFaultsReason(ctx context.Context, conns []*Conn) string {
	for _, c := range conns {
		if _, err := c.Root(ctx, "iptables -w -S INPUT >/dev/null && command -v iptables-save >/dev/null"); err != nil {
			return fmt.Sprintf("network faults over ssh need root and iptables on every host, and host %s: %v", c.Host.Name, err)
		}
	}
	return ""
}

// SharedClientAddress says why no cut can tell clients apart, or "" when
// each client host has an address of its own. It makes the network a
// clusters.SharedClientAddress.
func (nw *Network) SharedClientAddress() string {
	if len(nw.clients) > 0 {
		return ""
	}
	why := "under the ssh provider every client runs on the control host, behind one address, so a cut cannot single out one client or put clients on different sides"
	if nw.sharedWhy != "" {
		why += ": " + nw.sharedWhy
	}
	return why
}

// places returns the nodes as the planner takes them, with the client
// hosts among names: a node's place is its host, where its rules go, a
// client host has none (its pairs are cut at the nodes' hosts). A client
// host with an address of its own is at that address; without, it is the
// control host, as each host sees it.
func (nw *Network) places(names []string) ([]netrules.Host, error) {
	var hosts []netrules.Host
	conns := nw.hosts()
	for _, n := range nw.cl.nodes {
		hosts = append(hosts, netrules.Host{Name: n.name, Addr: n.conn.Host.Address, On: n.conn.Host.Name, Port: n.port()})
	}
	for _, name := range names {
		if slices.ContainsFunc(hosts, func(h netrules.Host) bool { return h.Name == name }) {
			continue
		}
		ca, own, err := nw.client(name)
		if err != nil {
			return nil, err
		}
		h := netrules.Host{Name: name, Addr: ca.String()}
		if !own {
			h = netrules.Host{Name: name, Seen: map[string]string{}}
			for on, c := range conns {
				h.Seen[on] = c.LocalIP()
			}
		}
		hosts = append(hosts, h)
	}
	return hosts, nil
}

// hosts returns the hosts of the nodes by name: the places of a plan.
func (nw *Network) hosts() map[string]*Conn {
	conns := map[string]*Conn{}
	for _, n := range nw.cl.nodes {
		conns[n.conn.Host.Name] = n.conn
	}
	return conns
}

// shared says in the provider's words why a rule on a host's address
// cannot make a fault, when err is netrules' SharedError; else it
// returns err.
func shared(err error) error {
	var se *netrules.SharedError
	switch {
	case !errors.As(err, &se):
		return fmt.Errorf("ssh network: %w", err)
	case se.Peer == "":
		return fmt.Errorf("ssh network: cannot make %s lossy: host %s also runs %s, and the loss would fall on its traffic too (give them hosts of their own: inventory backends:)", se.Host, se.On, se.Other)
	case se.Apart:
		return fmt.Errorf("ssh network: cannot cut %s from %s: both run on host %s, and iptables rules on a host's address cannot cut two nodes of one host apart (give them hosts of their own: inventory backends:)", se.Host, se.Other, se.On)
	}
	return fmt.Errorf("ssh network: cannot cut %s from %s: host %s also runs %s, which is on neither side, and a rule on the host's address would cut it too (give them hosts of their own: inventory backends:)", se.Host, se.Peer, se.On, se.Other)
}

// Cut drops every packet between each host of a and each host of b, in
// both directions, until Heal. The rules are clusters/netrules' plan: a
// pair of nodes is cut on both hosts by the other's address, a pair of a
// node and a client host on the node's host and its port. A cut that rules
// on the hosts' addresses cannot make exactly (see Network) is an error,
// and nothing is cut.
func (nw *Network) Cut(ctx context.Context, a, b []string) error {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	plan, err := nw.cutRules(a, b)
	if err != nil {
		return err
	}
	return nw.apply(ctx, plan)
}

// CutOneWay drops every packet from each host of from to each host of
// to, until Heal; packets the other way pass. The rules are those of Cut
// in one direction only (netrules.OneWay), with the same refusals.
func (nw *Network) CutOneWay(ctx context.Context, from, to []string) error {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	hosts, err := nw.places(append(slices.Clone(from), to...))
	if err != nil {
		return err
	}
	plan, err := netrules.OneWay(hosts, from, to)
	if err != nil {
		return shared(err)
	}
	return nw.apply(ctx, plan)
}

// cutRules returns the plan of a cut between a and b, or why rules on the
// hosts' addresses cannot make it exactly.
func (nw *Network) cutRules(a, b []string) (netrules.Plan, error) {
	hosts, err := nw.places(append(slices.Clone(a), b...))
	if err != nil {
		return nil, err
	}
	plan, err := netrules.Partition(hosts, [][]string{a, b})
	if err != nil {
		return nil, shared(err)
	}
	return plan, nil
}

// Loss drops each packet to or from hosts with probability p, until Heal.
// A client host's loss is put on the node hosts' traffic with the control
// host. A node's loss falls on all of its host's traffic: a node that
// shares its host with one hosts does not name is an error, and nothing is
// lost.
func (nw *Network) Loss(ctx context.Context, hosts []string, p float64) error {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	all, err := nw.places(hosts)
	if err != nil {
		return err
	}
	plan, err := netrules.Loss(all, hosts, p, netrules.LossShape{Both: true})
	if err != nil {
		return shared(err)
	}
	return nw.apply(ctx, plan)
}

// applyTimeout bounds a change of a host's rules once it has begun.
const applyTimeout = 30 * time.Second

// apply inserts each host's planned rules there, with the run's comment
// (netrules.Insert), and an ACCEPT of the host's SSH port above them that
// keeps the control connection alive.
//
// A change, once begun, runs to its end even when ctx ends first (within
// applyTimeout): closing the SSH session does not stop the host's shell,
// which would go on inserting rules behind the heal that follows (CI at
// ed6ca05: the fault phase ended during an isolate that took seconds to
// go in, and the heal's five passes found rules still coming). A ctx
// already ended begins nothing. So the rules on a host are always those
// the driver knows of, and a Heal after apply removes them all.
func (nw *Network) apply(ctx context.Context, plan netrules.Plan) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("ssh network: not begun: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), applyTimeout)
	defer cancel()
	conns := nw.hosts()
	var on []*Conn
	for _, r := range plan {
		on = append(on, conns[r.On])
	}
	slices.SortFunc(on, func(a, b *Conn) int { return strings.Compare(a.Host.Name, b.Host.Name) })
	return onEach(on, func(c *Conn) error {
		_, err := c.Root(ctx, netrules.Insert(plan.Of(c.Host.Name), netrules.Tag(nw.cl.opts.RunID), c.Host.Port))
		return err
	})
}

// onEach runs f on every host of conns at once, so that a fault goes in
// on all of them together (one after another, a partition would stand
// half-made for as long as the slowest hosts take, seconds on a loaded
// machine), and returns their errors joined in the order of conns.
func onEach(conns []*Conn, f func(c *Conn) error) error {
	errs := make([]error, len(conns))
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Go(func() { errs[i] = f(c) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Heal removes every rule of the run from every host.
func (nw *Network) Heal(ctx context.Context) error {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	return RemoveRules(ctx, nw.conns, nw.cl.opts.RunID)
}

// RemoveRules deletes every iptables rule whose comment is the run's
// (locktest:<run id>, netrules.Tag) from the hosts of conns
// (netrules.Remove). An empty runID removes the rules of every locktest
// run.
func RemoveRules(ctx context.Context, conns []*Conn, runID string) error {
	cmd := netrules.Remove(netrules.Tag(runID))
	return onEach(slices.Clone(conns), func(c *Conn) error {
		if _, err := c.Root(ctx, cmd); err != nil {
			return fmt.Errorf("heal: %w", err)
		}
		return nil
	})
}
