package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"syscall"
	"time"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/history"
)

// Clients is what the nemesis needs of the worker pool to pause clients.
type Clients interface {
	// Processes returns the live logical processes.
	Processes() []int
	// Arm makes a worker stop at a pause point the next time it passes it.
	Arm(process int, point string) error
	// WaitPoint waits until the worker reports that it stopped at the point.
	WaitPoint(ctx context.Context, process int) (string, error)
	// Continue lets a worker waiting at a pause point go on.
	Continue(process int) error
	// Disarm gives up an Arm whose point was not awaited.
	Disarm(process int) error
	// Signal sends a signal to the worker's OS process.
	Signal(process int, sig syscall.Signal) error
}

// Env is what faults may act on, and the values of their settings. The
// settings themselves are declared by the faults that own them (Setting):
// a run gives them values (Settings).
type Env struct {
	Cluster clusters.Cluster
	Clients Clients
	// PowerReason says why the run's nodes do not record what they sync
	// (no shim: no C compiler), which makes power-loss unavailable; ""
	// when they do or when the cluster says itself why not
	// (clusters.PowerCutter).
	PowerReason string

	// Net cuts and degrades the network between hosts; nil when the run has
	// no network namespaces, and NetReason says why.
	Net       Network
	NetReason string
	// ClientHosts are the network hosts of the clients, one per initial
	// worker ("c0", "c1", ...); node hosts are named as the nodes.
	ClientHosts []string
	// Delayer delays the packets of the delay fault; nil makes delay
	// unavailable. A run makes one (tc netem, or a delaying proxy where
	// the provider has no netem) whenever its faults include delay, so
	// only a run without it has none.
	Delayer Delayer

	// Clocks moves nodes' wall clocks; nil when the clock shim is not in
	// use, and ClockReason says why.
	Clocks      ClockControl
	ClockReason string

	// Disks slows nodes' syncs; nil when the run cannot (no shim, or nodes
	// that sync without libc), and DiskReason says why.
	Disks      SyncDelayer
	DiskReason string

	// Targets pins what a fault may hit: for a fault name, the nodes (by
	// name or role), client hosts ("c0", client-isolate and reply-loss only) or processes
	// ("p0") to choose among, each fault giving the pin its own meaning (see
	// ParseTargets and the shapes); a fault missing from it hits anything.
	// Build refuses pins a fault cannot honour.
	Targets map[string][]string
	// Stagger is the wait between the injections of the parts of a
	// combined fault ("partition+kill-node").
	Stagger time.Duration

	// Settings are the values of the faults' settings (Setting.Of reads
	// them from the Env).
	Settings Values

	// cuts, in a replay (BuildPlan), are the exact cuts a partition fault
	// makes, in place of its shape.
	cuts []Cut
}

func (env Env) values() Values { return env.Settings }

// Network is what network faults need of the platform (clusters.Network).
type Network = clusters.Network

// Delayer is what the delay fault needs of the platform (clusters.Delayer).
type Delayer = clusters.Delayer

// ClockControl is what clock faults need of the platform (clusters.Clocks).
type ClockControl = clusters.Clocks

// SyncDelayer is what slow-disk needs of the platform (clusters.SyncDelayer).
type SyncDelayer = clusters.SyncDelayer

// CrashableClients is the part of the pool kill-client needs.
type CrashableClients interface {
	Clients
	Kill(ctx context.Context, process int) error
	Replace(ctx context.Context, process int) (int, error)
}

// SkewableClients is the part of the pool clock-skew-client needs.
type SkewableClients interface {
	Clients
	SetWallOffset(process int, d time.Duration) error
}

// Build returns the faults called names. An unknown name, a pin in
// env.Targets that the fault cannot honour (see ParseTargets; a node, role,
// client host or worker the run can never have), or a fault the
// environment cannot apply, is an error that says which and why; a bad pin
// is refused even when its fault is unavailable.
func Build(names []string, env Env) ([]Fault, error) {
	var out []Fault
	for _, n := range names {
		for _, pn := range strings.Split(n, "+") {
			if _, ok := lookup(pn); !ok {
				return nil, fmt.Errorf("unknown fault %q (known: %s)", pn, strings.Join(Names(), ", "))
			}
		}
	}
	var procs []int
	if env.Clients != nil {
		procs = env.Clients.Processes()
	}
	for _, n := range names {
		for _, pn := range strings.Split(n, "+") {
			if err := env.checkPins(pn, procs); err != nil {
				return nil, fmt.Errorf("--target %w", err)
			}
		}
	}
	for _, n := range names {
		var parts []Fault
		for _, pn := range strings.Split(n, "+") {
			f, err := build(pn, env)
			if err != nil {
				return nil, fmt.Errorf("fault %s: %w", pn, err)
			}
			parts = append(parts, f)
		}
		if len(parts) == 1 {
			out = append(out, parts[0])
			continue
		}
		out = append(out, &combined{parts: parts, stagger: env.Stagger})
	}
	return out, nil
}

// build builds the registered fault name for env: it checks that env can
// apply it, builds it, gives it its kind, and lets it check the settings
// that need its kind.
func build(name string, env Env) (Fault, error) {
	s, _ := lookup(name)
	if err := s.Available(env); err != nil {
		return nil, err
	}
	f, err := s.New(env)
	if err != nil {
		return nil, err
	}
	k, ok := f.(interface{ setKind(*Spec, Env) })
	if !ok {
		// A fault without its kind records no settings in a schedule's
		// plan, and its replay would run with the replaying run's own.
		return nil, fmt.Errorf("nemesis: fault %s does not embed kind, so its schedule entries would lose its settings", name)
	}
	k.setKind(s, env)
	if c, ok := f.(interface{ check() error }); ok {
		if err := c.check(); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// Known reports whether name is a fault Build knows: one name, or names
// joined by "+" into a combined fault.
func Known(name string) bool {
	for _, pn := range strings.Split(name, "+") {
		if _, ok := lookup(pn); !ok {
			return false
		}
	}
	return true
}

// combined is several faults in force together, such as a partition and a
// clock jump on the node both sides still see. The schedule injects the
// parts in order, Stagger apart, recording each as its own op, and heals
// each after its own duration, but not before the last part went in: a
// node killed with no restart delay under a partition comes back at once,
// while the partition stays its window.
type combined struct {
	parts   []Fault
	stagger time.Duration
}

func (c *combined) Name() string {
	names := make([]string, len(c.parts))
	for i, p := range c.parts {
		names[i] = p.Name()
	}
	return strings.Join(names, "+")
}

// HealName names the heals of the parts; the schedule records each part's
// own heal op.
func (c *combined) HealName() string {
	names := make([]string, len(c.parts))
	for i, p := range c.parts {
		names[len(c.parts)-1-i] = p.HealName()
	}
	return strings.Join(names, "+")
}

func (c *combined) Duration() time.Duration {
	var d time.Duration
	for _, p := range c.parts {
		d = max(d, p.Duration())
	}
	return d
}

// Inject and Heal apply the parts without recording them one by one; the
// schedule does not call them (it walks the parts), but a caller holding a
// combined fault as a Fault still gets the whole of it.
func (c *combined) Inject(ctx context.Context, rng *rand.Rand) (history.Value, error) {
	var v history.Value
	for i, p := range c.parts {
		if i > 0 && !sleep(ctx, c.stagger) {
			return v, ctx.Err()
		}
		pv, err := p.Inject(ctx, rng)
		v.Targets = append(v.Targets, pv.Targets...)
		if err != nil {
			return v, err
		}
	}
	return v, nil
}

func (c *combined) Heal(ctx context.Context) (history.Value, error) {
	var v history.Value
	var errs []error
	for i := len(c.parts) - 1; i >= 0; i-- {
		pv, err := c.parts[i].Heal(ctx)
		v.Targets = append(v.Targets, pv.Targets...)
		errs = append(errs, err)
	}
	return v, errors.Join(errs...)
}
