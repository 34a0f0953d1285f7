package netns

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
)

// State is a lab as the kernel shows it at one moment: its bridge, the
// FORWARD rule it added to the host, and each host's veth, address,
// iptables rules and processes. It is read from the kernel (ip, iptables),
// never from what the lab remembers having done, so that comparing two
// States proves what a lab's heal claims without sharing its code.
type State struct {
	// Bridge says whether the lab's bridge exists and is up; Forward
	// whether the host's FORWARD chain holds the lab's ACCEPT rule.
	Bridge, Forward bool
	// Hosts are the lab's hosts by name.
	Hosts map[string]HostState
}

// HostState is one host of a lab as the kernel shows it.
type HostState struct {
	// Veth says whether the host's veth exists on this host, is up and is
	// attached to the lab's bridge.
	Veth bool
	// Addr is the IPv4 address and prefix of the namespace's eth0 while
	// it is up ("" when it is down or has none).
	Addr string
	// Rules are the namespace's filter table as `iptables -S` prints it:
	// its policies, chains and every rule.
	Rules []string
	// Procs are the pids of the processes in the namespace, when they
	// were asked for (ReadState's procs).
	Procs []string
}

// ReadState reads the lab as the kernel shows it now, and the processes
// of the hosts named in procs. An error means a part could not be read (a
// command failed), not that a part is missing: a missing bridge, veth or
// namespace is a State that says so.
func (l *Network) ReadState(ctx context.Context, procs []string) (State, error) {
	hosts := l.Hosts()
	l.mu.Lock()
	bridge, fwd := l.bridge, slices.Clone(l.fwd)
	l.mu.Unlock()
	s := State{Hosts: map[string]HostState{}}
	links, err := output(ctx, "ip", "-o", "link", "show")
	if err != nil {
		return s, err
	}
	veths := map[string]bool{}
	for _, line := range strings.Split(string(links), "\n") {
		name, up, master := parseLink(line)
		switch {
		case name == bridge:
			s.Bridge = up
		case name != "" && up && master == bridge:
			veths[name] = true
		}
	}
	if fwd != nil {
		s.Forward = run(ctx, append([]string{"iptables", "-w", "-C", "FORWARD"}, fwd...)...) == nil
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make([]error, len(hosts))
	for i, h := range hosts {
		wg.Go(func() {
			hs, err := readHost(ctx, h, slices.Contains(procs, h.Name))
			hs.Veth = veths[h.Veth]
			errs[i] = err
			mu.Lock()
			s.Hosts[h.Name] = hs
			mu.Unlock()
		})
	}
	wg.Wait()
	return s, errors.Join(errs...)
}

// readHost reads the namespace of h: eth0's address, its filter table
// and, with procs, its processes. A namespace that is gone reads as a
// HostState with no address and no rules.
func readHost(ctx context.Context, h Host, procs bool) (HostState, error) {
	var hs HostState
	if !nsExists(ctx, h.NS) {
		return hs, nil
	}
	// Listed only while eth0 is up.
	b, err := output(ctx, "ip", "-n", h.NS, "-o", "-4", "addr", "show", "dev", "eth0", "up")
	if err != nil {
		return hs, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		fs := strings.Fields(line)
		if i := slices.Index(fs, "inet"); i >= 0 && i+1 < len(fs) {
			hs.Addr = fs[i+1]
		}
	}
	b, err = output(ctx, "ip", "netns", "exec", h.NS, "iptables", "-w", "-S")
	if err != nil {
		return hs, err
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			hs.Rules = append(hs.Rules, line)
		}
	}
	if procs {
		b, err = output(ctx, "ip", "netns", "pids", h.NS)
		if err != nil {
			return hs, err
		}
		hs.Procs = strings.Fields(string(b))
	}
	return hs, nil
}

// parseLink reads one line of `ip -o link show`: the link's name
// (without its @peer), whether it is administratively up, and its master
// ("" for none); name is "" for a line that is no link.
func parseLink(line string) (name string, up bool, master string) {
	fs := strings.Fields(line)
	if len(fs) < 3 || !strings.HasSuffix(fs[0], ":") {
		return "", false, ""
	}
	name, _, _ = strings.Cut(strings.TrimSuffix(fs[1], ":"), "@")
	flags := strings.Split(strings.Trim(fs[2], "<>"), ",")
	up = slices.Contains(flags, "UP")
	if i := slices.Index(fs, "master"); i >= 0 && i+1 < len(fs) {
		master = fs[i+1]
	}
	return name, up, master
}

// Differences lists how now differs from base, the lab as it was made,
// one line each; none when the lab is as made. Every host of base must be
// in now with its veth attached and up, eth0 up with its address, and the
// very rules of base (a rule a fault left, in any chain, is a
// difference); a host of now that base lacks is one too. The hosts named
// in idle must have no process at all (a client host whose worker
// outlived its run); the others may run what they like. The bridge and
// the FORWARD rule must be there.
func Differences(base, now State, idle []string) []string {
	var out []string
	if !now.Bridge {
		out = append(out, "the bridge is gone or down")
	}
	if base.Forward && !now.Forward {
		out = append(out, "the host's FORWARD rule for the bridge is gone")
	}
	for _, n := range slices.Sorted(maps.Keys(base.Hosts)) {
		b, h := base.Hosts[n], now.Hosts[n]
		_, ok := now.Hosts[n]
		switch {
		case !ok:
			out = append(out, "host "+n+": not read")
			continue
		case !h.Veth:
			out = append(out, "host "+n+": its veth is gone, down or off the bridge")
		}
		if h.Addr != b.Addr {
			out = append(out, fmt.Sprintf("host %s: eth0 is up with address %q, made with %q", n, h.Addr, b.Addr))
		}
		out = append(out, ruleDifferences(n, b.Rules, h.Rules)...)
		if slices.Contains(idle, n) && len(h.Procs) > 0 {
			out = append(out, fmt.Sprintf("host %s: processes %s still run in it", n, strings.Join(h.Procs, " ")))
		}
	}
	for _, n := range slices.Sorted(maps.Keys(now.Hosts)) {
		if _, ok := base.Hosts[n]; !ok {
			out = append(out, "host "+n+": not in the lab as made")
		}
	}
	return out
}

// ruleDifferences lists how host's rules now differ from its rules as
// made: a rule more (a fault's left behind), a rule fewer, or the same
// rules in another order (iptables reads a chain in order).
func ruleDifferences(host string, base, now []string) []string {
	if slices.Equal(base, now) {
		return nil
	}
	count := map[string]int{}
	for _, r := range base {
		count[r]++
	}
	for _, r := range now {
		count[r]--
	}
	var out []string
	for _, r := range now { // in the chain's order
		if count[r] < 0 {
			count[r]++
			out = append(out, "host "+host+": iptables rule not in the lab as made: "+r)
		}
	}
	for _, r := range base {
		if count[r] > 0 {
			count[r]--
			out = append(out, "host "+host+": iptables rule of the lab as made is gone: "+r)
		}
	}
	if len(out) == 0 {
		out = append(out, "host "+host+": its iptables rules are the lab's as made, in another order")
	}
	return out
}

// Record reads the lab as it is now (ReadState) and keeps it as the lab
// as made, which AsMade compares with. It is called once every host was
// added and before any fault; the State must show the bridge, the FORWARD
// rule and each host's veth, and eth0 up with an address, or the lab was not
// made whole and Record fails.
func (l *Network) Record(ctx context.Context) error {
	s, err := l.ReadState(ctx, nil)
	if err != nil {
		return err
	}
	var broken []string
	if !s.Bridge {
		broken = append(broken, "the bridge is not up")
	}
	if !s.Forward {
		broken = append(broken, "no FORWARD rule")
	}
	for _, n := range slices.Sorted(maps.Keys(s.Hosts)) {
		if h := s.Hosts[n]; !h.Veth || h.Addr == "" {
			broken = append(broken, "host "+n+" has no veth up on the bridge, or no address up")
		}
	}
	if len(broken) > 0 {
		return fmt.Errorf("netns: lab %s is not whole: %s", l.id, strings.Join(broken, "; "))
	}
	l.mu.Lock()
	l.made = &s
	l.mu.Unlock()
	return nil
}

// AsMade proves the lab is as Record found it: it reads the lab from the
// kernel (ReadState) and returns an error listing every Difference, also
// when Record was never called; the hosts named in idle must run no
// process. It shares no code with Heal: a rule a heal missed, or one
// put in by anything else, is a difference.
func (l *Network) AsMade(ctx context.Context, idle []string) error {
	l.mu.Lock()
	made, closed := l.made, l.closed
	l.mu.Unlock()
	switch {
	case closed:
		return fmt.Errorf("netns: lab %s is closed", l.id)
	case made == nil:
		return fmt.Errorf("netns: lab %s was not recorded as made", l.id)
	}
	now, err := l.ReadState(ctx, idle)
	if err != nil {
		return err
	}
	if d := Differences(*made, now, idle); len(d) > 0 {
		if len(d) > 5 {
			d = append(d[:5], fmt.Sprintf("and %d more", len(d)-5))
		}
		return fmt.Errorf("netns: lab %s is not as made: %s", l.id, strings.Join(d, "; "))
	}
	return nil
}
