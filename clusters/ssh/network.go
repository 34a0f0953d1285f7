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

	"github.com/locktest/locktest/internal/shellquote"
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

// comment is the owner comment of the run's rules.
func (nw *Network) comment() string { return "locktest:" + nw.cl.opts.RunID }

// rule is one iptables rule to insert on a host.
type rule struct{ chain, spec string }

// Cut drops every packet between each host of a and each host of b, in
// both directions, until Heal. A cut that rules on the hosts' addresses
// cannot make exactly (see Network) is an error, and nothing is cut.
func (nw *Network) Cut(ctx context.Context, a, b []string) error {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	rules, err := nw.cutRules(a, b)
	if err != nil {
		return err
	}
	return nw.apply(ctx, rules)
}

// alone returns an error when n's host runs a node that is not on n's
// side of a cut (side): a rule on the host's address, made to cut n from
// other, would cut that node too. others is the cut's other side.
func (nw *Network) alone(n *node, side, others []string, other string) error {
	for _, m := range nw.cl.nodes {
		if m.conn != n.conn || slices.Contains(side, m.name) {
			continue
		}
		if slices.Contains(others, m.name) {
			return fmt.Errorf("ssh network: cannot cut %s from %s: both run on host %s, and iptables rules on a host's address cannot cut two nodes of one host apart (give them hosts of their own: inventory backends:)", n.name, m.name, n.conn.Host.Name)
		}
		return fmt.Errorf("ssh network: cannot cut %s from %s: host %s also runs %s, which is on neither side, and a rule on the host's address would cut it too (give them hosts of their own: inventory backends:)", n.name, other, n.conn.Host.Name, m.name)
	}
	return nil
}

// cutRules returns the rules of a cut between a and b on each host, or
// why rules on the hosts' addresses cannot make it exactly.
func (nw *Network) cutRules(a, b []string) (map[*Conn][]rule, error) {
	rules := map[*Conn][]rule{}
	add := func(x, y string, xs, ys []string) error {
		nx, _ := nw.cl.find(x)
		if nx == nil {
			return nil // a client host: its rules go into the nodes
		}
		ny, _ := nw.cl.find(y)
		if ny != nil {
			if err := nw.alone(nx, xs, ys, y); err != nil {
				return err
			}
			if err := nw.alone(ny, ys, xs, x); err != nil {
				return err
			}
			ip := ny.conn.Host.Address
			rules[nx.conn] = append(rules[nx.conn], rule{"INPUT", "-s " + ip}, rule{"OUTPUT", "-d " + ip})
			return nil
		}
		ca, own, err := nw.client(y)
		if err != nil {
			return err
		}
		// A client reaches a node on the node's own port only, so a rule
		// on that port cuts the pair exactly, also where the host runs
		// other nodes: from the client's own address, or, without one,
		// from the control host's (then every client at once).
		ip := nx.conn.LocalIP()
		if own {
			ip = ca.String()
		}
		port := strconv.Itoa(nx.port())
		rules[nx.conn] = append(rules[nx.conn], rule{"INPUT", "-s " + ip + " -p tcp --dport " + port}, rule{"OUTPUT", "-d " + ip + " -p tcp --sport " + port})
		return nil
	}
	for _, x := range a {
		for _, y := range b {
			if err := add(x, y, a, b); err != nil {
				return nil, err
			}
			if err := add(y, x, b, a); err != nil {
				return nil, err
			}
		}
	}
	return rules, nil
}

// Loss drops each packet to or from hosts with probability p, until Heal.
// A client host's loss is put on the node hosts' traffic with the control
// host. A node's loss falls on all of its host's traffic: a node that
// shares its host with one hosts does not name is an error, and nothing is
// lost.
func (nw *Network) Loss(ctx context.Context, hosts []string, p float64) error {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	stat := fmt.Sprintf("-m statistic --mode random --probability %.4f", p)
	rules := map[*Conn][]rule{}
	clients := false
	for _, h := range hosts {
		n, _ := nw.cl.find(h)
		if n != nil {
			for _, m := range nw.cl.nodes {
				if m.conn == n.conn && !slices.Contains(hosts, m.name) {
					return fmt.Errorf("ssh network: cannot make %s lossy: host %s also runs %s, and the loss would fall on its traffic too (give them hosts of their own: inventory backends:)", n.name, n.conn.Host.Name, m.name)
				}
			}
			rules[n.conn] = append(rules[n.conn], rule{"INPUT", stat}, rule{"OUTPUT", stat})
			continue
		}
		ca, own, err := nw.client(h)
		if err != nil {
			return err
		}
		if !own {
			clients = true
			continue
		}
		for _, n := range nw.cl.nodes {
			ip := ca.String()
			rules[n.conn] = append(rules[n.conn], rule{"INPUT", "-s " + ip + " " + stat}, rule{"OUTPUT", "-d " + ip + " " + stat})
		}
	}
	if clients {
		for _, n := range nw.cl.nodes {
			ctl := n.conn.LocalIP()
			port := strconv.Itoa(n.port())
			rules[n.conn] = append(rules[n.conn], rule{"INPUT", "-s " + ctl + " -p tcp --dport " + port + " " + stat},
				rule{"OUTPUT", "-d " + ctl + " -p tcp --sport " + port + " " + stat})
		}
	}
	return nw.apply(ctx, rules)
}

// applyTimeout bounds a change of a host's rules once it has begun.
const applyTimeout = 30 * time.Second

// apply inserts rules on their hosts, with the run's comment, after an
// ACCEPT of the host's SSH port that keeps the control connection alive.
//
// A change, once begun, runs to its end even when ctx ends first (within
// applyTimeout): closing the SSH session does not stop the host's shell,
// which would go on inserting rules behind the heal that follows (CI at
// ed6ca05: the fault phase ended during an isolate that took seconds to
// go in, and the heal's five passes found rules still coming). A ctx
// already ended begins nothing. So the rules on a host are always those
// the driver knows of, and a Heal after apply removes them all.
func (nw *Network) apply(ctx context.Context, rules map[*Conn][]rule) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("ssh network: not begun: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), applyTimeout)
	defer cancel()
	conns := make([]*Conn, 0, len(rules))
	for c := range rules {
		conns = append(conns, c)
	}
	slices.SortFunc(conns, func(a, b *Conn) int { return strings.Compare(a.Host.Name, b.Host.Name) })
	return onEach(conns, func(c *Conn) error {
		rs := rules[c]
		var b strings.Builder
		b.WriteString("set -e\n")
		seen := map[rule]bool{}
		for _, r := range rs {
			if seen[r] {
				continue
			}
			seen[r] = true
			fmt.Fprintf(&b, "iptables -w -I %s %s -m comment --comment %s -j DROP\n", r.chain, r.spec, nw.comment())
		}
		sp := strconv.Itoa(c.Host.Port)
		// The ACCEPT goes (back) to the top, above the DROPs just added.
		fmt.Fprintf(&b, "iptables -w -D INPUT -p tcp --dport %[1]s -m comment --comment %[2]s -j ACCEPT 2>/dev/null || true\niptables -w -I INPUT -p tcp --dport %[1]s -m comment --comment %[2]s -j ACCEPT\n", sp, nw.comment())
		fmt.Fprintf(&b, "iptables -w -D OUTPUT -p tcp --sport %[1]s -m comment --comment %[2]s -j ACCEPT 2>/dev/null || true\niptables -w -I OUTPUT -p tcp --sport %[1]s -m comment --comment %[2]s -j ACCEPT\n", sp, nw.comment())
		_, err := c.Root(ctx, b.String())
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
// (locktest:<run id>) from the hosts of conns. An empty runID removes the
// rules of every locktest run.
func RemoveRules(ctx context.Context, conns []*Conn, runID string) error {
	pat := "locktest:" + runID
	// The rules are listed first and deleted after, a few passes at most,
	// until none is left.
	cmd := fmt.Sprintf(`command -v iptables-save >/dev/null || exit 0
for pass in 1 2 3 4 5; do
	rules=$(iptables-save -t filter | grep -F -e %[1]s | sed -e 's/^-A /-D /') || true
	[ -z "$rules" ] && exit 0
	printf '%%s\n' "$rules" | while read -r r; do eval "iptables -w -t filter $r" || true; done
done
echo "rules of %[2]s are still there after 5 passes" >&2; exit 1`, shellquote.Quote(pat), pat)
	return onEach(slices.Clone(conns), func(c *Conn) error {
		if _, err := c.Root(ctx, cmd); err != nil {
			return fmt.Errorf("heal: %w", err)
		}
		return nil
	})
}
