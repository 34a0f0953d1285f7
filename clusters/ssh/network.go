package ssh

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Network makes the nemesis's network faults with iptables rules on the
// node hosts, each carrying the comment locktest:<run id>. Hosts are named
// as the nemesis names them: nodes by name, client hosts c0, c1, ... — the
// clients all run on the control host, so every client host stands for
// the control host's address as each node host sees it. SSH to the hosts
// is never cut: node-to-client cuts drop only the node's service port,
// and loss spares the SSH port. Its methods are safe for concurrent use.
type Network struct {
	cl    *Cluster
	conns []*Conn
	mu    sync.Mutex
}

// Network returns the cluster's network faults over the hosts of conns.
func (cl *Cluster) Network(conns []*Conn) *Network {
	return &Network{cl: cl, conns: conns}
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

// SharedClientAddress says why no cut can tell clients apart: they all run
// on the control host, behind one address. It makes the network a
// clusters.SharedClientAddress.
func (nw *Network) SharedClientAddress() string {
	return "under the ssh provider every client runs on the control host, behind one address, so a cut cannot single out one client or put clients on different sides"
}

// comment is the owner comment of the run's rules.
func (nw *Network) comment() string { return "locktest:" + nw.cl.opts.RunID }

// rule is one iptables rule to insert on a host.
type rule struct{ chain, spec string }

// Cut drops every packet between each host of a and each host of b, in
// both directions, until Heal.
func (nw *Network) Cut(ctx context.Context, a, b []string) error {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	rules := map[*Conn][]rule{}
	add := func(x, y string) error {
		nx, _ := nw.cl.find(x)
		if nx == nil {
			return nil // a client host: its rules go into the nodes
		}
		ny, _ := nw.cl.find(y)
		if ny != nil {
			ip := ny.conn.Host.Address
			rules[nx.conn] = append(rules[nx.conn], rule{"INPUT", "-s " + ip}, rule{"OUTPUT", "-d " + ip})
			return nil
		}
		if !strings.HasPrefix(y, "c") {
			return fmt.Errorf("ssh network: unknown host %q", y)
		}
		ctl := nx.conn.LocalIP()
		port := strconv.Itoa(nx.port())
		rules[nx.conn] = append(rules[nx.conn], rule{"INPUT", "-s " + ctl + " -p tcp --dport " + port}, rule{"OUTPUT", "-d " + ctl + " -p tcp --sport " + port})
		return nil
	}
	for _, x := range a {
		for _, y := range b {
			if err := add(x, y); err != nil {
				return err
			}
			if err := add(y, x); err != nil {
				return err
			}
		}
	}
	return nw.apply(ctx, rules)
}

// Loss drops each packet to or from hosts with probability p, until Heal.
// A client host's loss is put on the node hosts' traffic with the control
// host.
func (nw *Network) Loss(ctx context.Context, hosts []string, p float64) error {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	stat := fmt.Sprintf("-m statistic --mode random --probability %.4f", p)
	rules := map[*Conn][]rule{}
	clients := false
	for _, h := range hosts {
		n, _ := nw.cl.find(h)
		if n == nil {
			clients = true
			continue
		}
		rules[n.conn] = append(rules[n.conn], rule{"INPUT", stat}, rule{"OUTPUT", stat})
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

// apply inserts rules on their hosts, with the run's comment, after an
// ACCEPT of the host's SSH port that keeps the control connection alive.
func (nw *Network) apply(ctx context.Context, rules map[*Conn][]rule) error {
	var errs []error
	for c, rs := range rules {
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
		if _, err := c.Root(ctx, b.String()); err != nil {
			errs = append(errs, err)
		}
	}
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
echo "rules of %[2]s are still there after 5 passes" >&2; exit 1`, Quote(pat), pat)
	var errs []error
	for _, c := range slices.Clone(conns) {
		if _, err := c.Root(ctx, cmd); err != nil {
			errs = append(errs, fmt.Errorf("heal: %w", err))
		}
	}
	return errors.Join(errs...)
}
