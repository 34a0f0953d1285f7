package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
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

// Env is what faults may act on, and their settings.
type Env struct {
	Cluster clusters.Cluster
	Clients Clients
	// ClientPause is how long a client stays paused.
	ClientPause time.Duration
	// PausePoint is where a client is paused; "" pauses it at a random moment.
	PausePoint string
	// NodeDown is how long a killed node stays down before its restart
	// (antirez's "delayed restart" when it exceeds the TTL).
	NodeDown time.Duration
	// Window is how long the faults without a duration of their own (node
	// pauses, partitions, loss, delay, clock faults) stay before the heal.
	Window time.Duration

	// Net cuts and degrades the network between hosts; nil when the run has
	// no network namespaces, and NetReason says why.
	Net       Network
	NetReason string
	// ClientHosts are the network hosts of the clients, one per initial
	// worker ("c0", "c1", ...); node hosts are named as the nodes.
	ClientHosts []string
	// Groups is the explicit grouping of the "partition" fault, host names
	// per side.
	Groups [][]string
	// Loss is the fraction of packets the loss fault drops.
	Loss float64
	// Delay is the latency the delay fault adds to each packet, made by
	// Delayer; nil Delayer makes delay unavailable, DelayReason says why.
	Delay       time.Duration
	Delayer     Delayer
	DelayReason string

	// Clocks moves nodes' wall clocks; nil when the clock shim is not in
	// use, and ClockReason says why.
	Clocks      ClockControl
	ClockReason string
	// ClockBump is how far clock-bump jumps a node's clock and
	// clock-skew-client a worker's.
	ClockBump time.Duration
	// StrobeRate is how often clock-strobe flips a clock.
	StrobeRate time.Duration

	// KillHolder makes kill-client kill a worker at a pause point —
	// KillPoint, or after-acquire when that is empty: while it holds the
	// lock — rather than at a random moment.
	KillHolder bool
	KillPoint  string

	// Targets pins what a fault may hit: for a fault name, the nodes (by
	// name or role), client hosts ("c0", client-isolate only) or processes
	// ("p0") to choose among, each fault giving the pin its own meaning (see
	// ParseTargets and the shapes); a fault missing from it hits anything.
	// Build refuses pins a fault cannot honour. ClockDirection is
	// ClockEither, ClockForward or ClockBackward.
	Targets        map[string][]string
	ClockDirection string
	// Stagger is the wait between the injections of the parts of a
	// combined fault ("partition+kill-node").
	Stagger time.Duration
}

// Network is what network faults need of the run's network namespaces
// (netlab.Lab implements it). Host names are node names and ClientHosts.
type Network interface {
	Cut(ctx context.Context, a, b []string) error
	Loss(ctx context.Context, hosts []string, p float64) error
	Heal(ctx context.Context) error
}

// Delayer adds latency to the traffic to chosen nodes (the delaying proxy,
// or tc netem where the kernel has it).
type Delayer interface {
	Delay(ctx context.Context, nodes []string, d time.Duration) error
	// Mechanism names how the delay is made, for the history and docs.
	Mechanism() string
}

// ClockControl moves nodes' wall clocks (clockshim.Clocks implements it).
type ClockControl interface {
	Set(node string, d time.Duration) error
	Offset(node string) time.Duration
}

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

var builders = map[string]func(Env) (Fault, error){
	"pause-client":      newPauseClient,
	"kill-node":         newKillNode,
	"pause-node":        newPauseNode,
	"kill-client":       newKillClient,
	"isolate":           partitionBuilder("isolate"),
	"halves":            partitionBuilder("halves"),
	"majorities-ring":   partitionBuilder("majorities-ring"),
	"bridge":            partitionBuilder("bridge"),
	"client-isolate":    partitionBuilder("client-isolate"),
	"partition":         partitionBuilder("partition"),
	"loss":              newLoss,
	"delay":             newDelay,
	"clock-bump":        newClockBump,
	"clock-strobe":      newClockStrobe,
	"clock-reset":       newClockReset,
	"clock-skew-client": newClockSkewClient,
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
			if _, ok := builders[pn]; !ok {
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
			f, err := builders[pn](env)
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

// Known reports whether name is a fault Build knows: one name, or names
// joined by "+" into a combined fault.
func Known(name string) bool {
	for _, pn := range strings.Split(name, "+") {
		if _, ok := builders[pn]; !ok {
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

// pauseClient freezes one worker process with SIGSTOP, as a stop-the-world
// GC pause would, and thaws it with SIGCONT. At a pause point it stops the
// worker exactly there: the worker reports the point and blocks, and is
// stopped before it is told to go on.
type pauseClient struct {
	env Env

	mu     sync.Mutex
	target int
	paused bool
}

func newPauseClient(env Env) (Fault, error) {
	if env.Clients == nil {
		return nil, fmt.Errorf("%w: no client pool", ErrUnavailable)
	}
	if env.ClientPause <= 0 {
		return nil, fmt.Errorf("client pause duration must be positive, got %v", env.ClientPause)
	}
	return &pauseClient{env: env}, nil
}

func (f *pauseClient) Name() string            { return "pause-client" }
func (f *pauseClient) HealName() string        { return "resume-client" }
func (f *pauseClient) Duration() time.Duration { return f.env.ClientPause }

func (f *pauseClient) Inject(ctx context.Context, rng *rand.Rand) (history.Value, error) {
	p, err := f.env.pickProcess(f.Name(), f.env.Clients.Processes(), rng)
	if err != nil {
		return history.Value{}, err
	}
	v := history.Value{Targets: []string{fmt.Sprintf("p%d", p)}, Point: f.env.PausePoint,
		Duration: int64(f.env.ClientPause)}
	if f.env.PausePoint != "" {
		if err := f.env.Clients.Arm(p, f.env.PausePoint); err != nil {
			return v, fmt.Errorf("%w: arm p%d: %v", errNotApplied, p, err)
		}
		if _, err := f.env.Clients.WaitPoint(ctx, p); err != nil {
			_ = f.env.Clients.Disarm(p)
			return v, fmt.Errorf("%w: p%d did not reach %s: %v", errNotApplied, p, f.env.PausePoint, err)
		}
	}
	// The worker waits at the point until it is told to go on, which Heal
	// does only after SIGCONT: however late the kernel applies SIGSTOP, the
	// worker cannot get past the point while it is meant to be paused.
	if err := f.env.Clients.Signal(p, syscall.SIGSTOP); err != nil {
		// The signal may have been delivered even though the wait for it
		// failed: undo it, and record the pause as of unknown effect.
		_ = f.env.Clients.Signal(p, syscall.SIGCONT)
		f.release(p)
		return v, fmt.Errorf("SIGSTOP p%d: %v", p, err)
	}
	f.mu.Lock()
	f.target, f.paused = p, true
	f.mu.Unlock()
	return v, nil
}

func (f *pauseClient) Heal(ctx context.Context) (history.Value, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.paused {
		return history.Value{}, nil
	}
	v := history.Value{Targets: []string{fmt.Sprintf("p%d", f.target)}}
	if err := f.env.Clients.Signal(f.target, syscall.SIGCONT); err != nil && !slices.Contains(f.env.Clients.Processes(), f.target) {
		// The worker died while paused: nothing is left to resume.
		f.paused = false
		return v, nil
	} else if err != nil {
		return v, fmt.Errorf("SIGCONT p%d: %w", f.target, err)
	}
	f.release(f.target)
	f.paused = false
	return v, nil
}

// release lets a worker held at the pause point go on; for a worker that
// is not at a point (or has died) it is harmless.
func (f *pauseClient) release(p int) {
	if f.env.PausePoint != "" {
		_ = f.env.Clients.Continue(p)
	}
}

// killNode SIGKILLs one node of the cluster and restarts it, with the same
// data directory, when healed.
type killNode struct {
	env    Env
	killer clusters.Killer

	mu   sync.Mutex
	dead []clusters.Node
}

func newKillNode(env Env) (Fault, error) {
	k, ok := env.Cluster.(clusters.Killer)
	if !ok {
		return nil, fmt.Errorf("%w: the cluster provider cannot kill nodes", ErrUnavailable)
	}
	return &killNode{env: env, killer: k}, nil
}

func (f *killNode) Name() string            { return "kill-node" }
func (f *killNode) HealName() string        { return "restart-node" }
func (f *killNode) Duration() time.Duration { return f.env.NodeDown }

func (f *killNode) Inject(ctx context.Context, rng *rand.Rand) (history.Value, error) {
	n, roles, err := f.env.pickNode(ctx, f.Name(), f.env.candidates(f.Name()), rng)
	if err != nil {
		return history.Value{}, err
	}
	v := history.Value{Targets: []string{n.Name}, Duration: int64(f.env.NodeDown), Roles: roles}
	err = f.killer.Kill(ctx, n)
	// A failed kill is recorded as info: the node may be down all the same,
	// so Heal restarts it too (restarting a running node does nothing).
	f.mu.Lock()
	if !slices.Contains(f.dead, n) {
		f.dead = append(f.dead, n)
	}
	f.mu.Unlock()
	if err != nil {
		return v, fmt.Errorf("kill %s: %w", n.Name, err)
	}
	return v, nil
}

func (f *killNode) Heal(ctx context.Context) (history.Value, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var v history.Value
	for len(f.dead) > 0 {
		n := f.dead[0]
		if err := f.killer.Restart(ctx, n); err != nil {
			return v, fmt.Errorf("restart %s: %w", n.Name, err)
		}
		v.Targets = append(v.Targets, n.Name)
		f.dead = f.dead[1:]
	}
	return v, nil
}
