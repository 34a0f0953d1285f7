package backend

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// The cluster params (--cluster-opt) of the etcd backend.
const (
	// EtcdParamTickMs sets the raft heartbeat interval, in milliseconds.
	EtcdParamTickMs = "tick-ms"
	// EtcdParamElectionMs sets the raft election timeout, in milliseconds.
	EtcdParamElectionMs = "election-ms"
)

// EtcdParams are the params ParseEtcdParams reads.
var EtcdParams = []string{EtcdParamTickMs, EtcdParamElectionMs}

// EtcdDefaultNodes is the size of an etcd cluster when none is asked for.
const EtcdDefaultNodes = 3

// EtcdTiming is the raft timing of an etcd cluster's members.
type EtcdTiming struct {
	// TickMs is the heartbeat interval and ElectionMs the election
	// timeout, in milliseconds.
	TickMs, ElectionMs int
}

// DefaultEtcdTiming is a heartbeat every 25ms and a 250ms election
// timeout: they elect the first leader of a fresh 3-member cluster within
// a few hundred milliseconds, and make etcd's smallest lease TTL (1.5
// election timeouts, rounded up to whole seconds) one second.
var DefaultEtcdTiming = EtcdTiming{TickMs: 25, ElectionMs: 250}

// ParseEtcdParams returns the timing params sets over DefaultEtcdTiming.
// A param it does not read, a value that is not a positive number of
// milliseconds, and an election timeout shorter than 5 heartbeats are
// errors that name the param and its value.
func ParseEtcdParams(params map[string]string) (EtcdTiming, error) {
	t := DefaultEtcdTiming
	for _, k := range slices.Sorted(maps.Keys(params)) {
		v := params[k]
		n, err := strconv.Atoi(v)
		switch {
		case !slices.Contains(EtcdParams, k):
			return t, fmt.Errorf("etcd: unknown cluster param %q (known: %s)", k, strings.Join(EtcdParams, ", "))
		case err != nil || n <= 0:
			return t, fmt.Errorf("etcd: cluster param %s=%q must be a positive number of milliseconds", k, v)
		case k == EtcdParamTickMs:
			t.TickMs = n
		default:
			t.ElectionMs = n
		}
	}
	return t, t.Check()
}

// Check refuses a timing raft cannot run with: a heartbeat that is not
// positive, or an election timeout shorter than 5 heartbeats.
func (t EtcdTiming) Check() error {
	if t.TickMs <= 0 || t.ElectionMs < 5*t.TickMs {
		return fmt.Errorf("etcd: election timeout %dms must be at least 5 heartbeats of %dms", t.ElectionMs, t.TickMs)
	}
	return nil
}

// NodeArgs are the timing flags of locktest's own etcd member program
// (`locktest node etcd`).
func (t EtcdTiming) NodeArgs() []string {
	return []string{"--tick-ms", strconv.Itoa(t.TickMs), "--election-ms", strconv.Itoa(t.ElectionMs)}
}

// UpstreamArgs are the same timing as the upstream etcd binary's flags.
func (t EtcdTiming) UpstreamArgs() []string {
	return []string{"--heartbeat-interval", strconv.Itoa(t.TickMs), "--election-timeout", strconv.Itoa(t.ElectionMs)}
}

// etcdNoClockShim is why the clock shim cannot move an etcd member's
// clock.
const etcdNoClockShim = "etcd nodes are Go programs, which read the wall clock without libc: the LD_PRELOAD clock shim cannot move them (not applicable)"

// The roles of etcd members, as EtcdRole reads them.
const (
	EtcdLeader   = "leader"
	EtcdFollower = "follower"
)

// EtcdRoles returns the roles a member can have: it leads or follows.
func EtcdRoles() []string { return []string{EtcdLeader, EtcdFollower} }
