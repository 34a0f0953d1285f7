package nemesis

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/locktest/locktest/clusters"
)

// Ability is something a fault needs of the run's platform (the provider,
// the network lab, the clock shim) or of its client pool. A fault lists
// the abilities it needs in its Spec; the run sets up what the faults it
// was asked for need, and a missing ability is the reason a fault is not
// available.
type Ability string

// The abilities.
const (
	// NeedClients: stop, continue and signal the worker processes.
	NeedClients Ability = "clients"
	// NeedCrashClients: kill workers and start replacements.
	NeedCrashClients Ability = "crash-clients"
	// NeedSkewClients: move a worker's wall clock.
	NeedSkewClients Ability = "skew-clients"
	// NeedRateClients: run a worker's runtime clock at a rate.
	NeedRateClients Ability = "rate-clients"
	// NeedKillNodes: kill nodes and restart them (clusters.Killer).
	NeedKillNodes Ability = "kill-nodes"
	// NeedPowerCut: cut a node's power, losing what it had not synced
	// (clusters.PowerCutter, with the run's sync records).
	NeedPowerCut Ability = "power-cut"
	// NeedPauseNodes: stop and continue nodes (clusters.Pauser).
	NeedPauseNodes Ability = "pause-nodes"
	// NeedNetwork: cut and degrade the links between hosts (Env.Net).
	NeedNetwork Ability = "network"
	// NeedDelay: delay a node's traffic (Env.Delayer).
	NeedDelay Ability = "delay"
	// NeedClocks: move nodes' wall clocks (Env.Clocks).
	NeedClocks Ability = "clocks"
	// NeedSyncDelay: make nodes' syncs begin late (Env.Disks).
	NeedSyncDelay Ability = "sync-delay"
	// NeedSeparateClients: a network that can cut one client off or put
	// clients on different sides (not a clusters.SharedClientAddress).
	NeedSeparateClients Ability = "separate-clients"
	// NeedClientGroups: a network that can put the clients of
	// Env.Groups on their sides (with a shared address, all of them on
	// one side).
	NeedClientGroups Ability = "client-groups"
)

// abilities maps each ability to the check that env has it: nil, or an
// error wrapping ErrUnavailable that says what is missing.
var abilities = map[Ability]func(env Env) error{
	NeedClients:      needClients,
	NeedCrashClients: needCrashableClients,
	NeedSkewClients:  needSkewableClients,
	NeedRateClients:  needRateClients,
	NeedKillNodes:    needKiller,
	NeedPowerCut:     needPowerCutter,
	NeedPauseNodes:   needPauser,
	NeedNetwork:      needNetwork,
	NeedDelay:        needDelayer,
	NeedClocks:       needClocks,
	NeedSyncDelay:    needDisks,
	// A network that cannot tell clients apart makes these unavailable.
	NeedSeparateClients: needSeparateClients,
	NeedClientGroups:    needClientGroups,
}

// Available reports whether env has every ability the fault needs: nil,
// or an error wrapping ErrUnavailable with the reason.
func (s Spec) Available(env Env) error {
	for _, a := range s.Needs {
		if err := abilities[a](env); err != nil {
			return err
		}
	}
	return nil
}

// Needs reports whether one of the faults named (parts of combined faults,
// split) needs ability a, so that the run sets it up.
func Needs(faults []string, a Ability) bool {
	for _, f := range faults {
		if s, ok := lookup(f); ok && slices.Contains(s.Needs, a) {
			return true
		}
	}
	return false
}

// needClients: a fault that acts on the worker processes.
func needClients(env Env) error {
	if env.Clients == nil {
		return fmt.Errorf("%w: no client pool", ErrUnavailable)
	}
	return nil
}

// needCrashableClients: a fault that kills workers and starts replacements.
func needCrashableClients(env Env) error {
	if _, ok := env.Clients.(CrashableClients); !ok || env.Clients == nil {
		return fmt.Errorf("%w: the client pool cannot kill and replace workers", ErrUnavailable)
	}
	return nil
}

// needSkewableClients: a fault that moves a worker's wall clock.
func needSkewableClients(env Env) error {
	if _, ok := env.Clients.(SkewableClients); !ok || env.Clients == nil {
		return fmt.Errorf("%w: the client pool cannot skew clocks", ErrUnavailable)
	}
	if r, ok := env.Clients.(interface{ WallOffsetReason() string }); ok && r.WallOffsetReason() != "" {
		return fmt.Errorf("%w: %s", ErrUnavailable, r.WallOffsetReason())
	}
	return nil
}

// needKiller: a fault that kills and restarts nodes.
func needKiller(env Env) error {
	if _, ok := env.Cluster.(clusters.Killer); !ok {
		return fmt.Errorf("%w: the cluster provider cannot kill nodes", ErrUnavailable)
	}
	return nil
}

// needPowerCutter: a fault that cuts a node's power. The provider must
// know what its nodes synced (only the local provider's redis nodes do, and
// only under the shim that records it); a cut without that knowledge would
// be a kill, not a power loss.
func needPowerCutter(env Env) error {
	pc, ok := env.Cluster.(clusters.PowerCutter)
	if !ok {
		return fmt.Errorf("%w: the cluster cannot cut a node's power: it does not know what its nodes synced (the local provider's redis nodes record it)", ErrUnavailable)
	}
	if env.PowerReason != "" {
		return fmt.Errorf("%w: %s", ErrUnavailable, env.PowerReason)
	}
	if why := pc.PowerCutReason(); why != "" {
		return fmt.Errorf("%w: the cluster cannot cut a node's power: %s", ErrUnavailable, why)
	}
	return nil
}

// needPauser: a fault that stops and continues nodes.
func needPauser(env Env) error {
	if _, ok := env.Cluster.(clusters.Pauser); !ok {
		return fmt.Errorf("%w: the cluster provider cannot pause nodes", ErrUnavailable)
	}
	return nil
}

// needNetwork: a fault that cuts or degrades the network between hosts.
func needNetwork(env Env) error {
	if env.Net == nil {
		return fmt.Errorf("%w: %s", ErrUnavailable, orDefault(env.NetReason, "the run has no network namespaces"))
	}
	return nil
}

// needDelayer: a fault that delays a node's traffic.
func needDelayer(env Env) error {
	if env.Delayer == nil {
		return fmt.Errorf("%w: the run set up no delay (tc netem or a delaying proxy): it does so only when its faults include delay", ErrUnavailable)
	}
	return nil
}

// needClocks: a fault that moves nodes' wall clocks.
func needClocks(env Env) error {
	if env.Clocks == nil {
		return fmt.Errorf("%w: %s", ErrUnavailable, orDefault(env.ClockReason, "the run has no clock shim"))
	}
	return nil
}

// needDisks: a fault that slows nodes' syncs.
func needDisks(env Env) error {
	if env.Disks == nil {
		return fmt.Errorf("%w: %s", ErrUnavailable, orDefault(env.DiskReason, "the run has no shim to slow its nodes' syncs"))
	}
	return nil
}

// sharedAddress returns why env's network cannot tell clients apart, or "".
func sharedAddress(env Env) string {
	if s, ok := env.Net.(clusters.SharedClientAddress); ok {
		return s.SharedClientAddress()
	}
	return ""
}

// needSeparateClients: a fault that cuts one client off, or clients from
// each other.
func needSeparateClients(env Env) error {
	if why := sharedAddress(env); why != "" {
		return fmt.Errorf("%w: %s", ErrUnavailable, why)
	}
	return nil
}

// needClientGroups: the partition fault, whose groups may put clients on
// different sides.
func needClientGroups(env Env) error {
	why := sharedAddress(env)
	if why == "" {
		return nil
	}
	sides := 0
	for _, g := range Partition.Of(env) {
		if slices.ContainsFunc(g, isClientHost) {
			sides++
		}
	}
	if sides > 1 {
		return fmt.Errorf("%w: --partition puts clients in %d groups; %s", ErrUnavailable, sides, why)
	}
	return nil
}

// isClientHost reports whether h names a client host: "c" and a number.
func isClientHost(h string) bool {
	n, ok := strings.CutPrefix(h, "c")
	_, err := strconv.Atoi(n)
	return ok && err == nil
}
