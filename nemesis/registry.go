package nemesis

import (
	"fmt"
	"slices"
	"sort"
	"sync"

	"github.com/locktest/locktest/history"
)

// Spec is everything a fault is. Each fault lives in a file of its own in
// this package, and that file's init function registers its Spec; the
// checkers, reports, the matrix, scenario files and `locktest list` read
// the registry (history.FaultNamed for what a history reader needs,
// Specs and Lookup for the rest) and keep no list of faults of their own.
type Spec struct {
	history.FaultKind

	// Settings are the run settings the fault reads, named as their flags
	// ("pause", "window"). A run that sets a flag none of its faults reads
	// is refused, because the setting would change nothing.
	Settings []string

	// Needs are the abilities the fault needs of the run's platform and
	// client pool; without one it is not available (see Available).
	Needs []Ability

	// WaitsWindow says that the fault waits, up to its window, for its
	// moment (an unsynced write, a client's acquire) before it hits, and
	// then stays its own length: a plan that keeps other faults in until
	// it has healed must allow for the wait.
	WaitsWindow bool

	// Whole says that the fault hits every data node of the cluster at
	// once (kill-all, power-loss-all): at its heal the cluster forms
	// again as a whole, as it did at its start.
	Whole bool

	// New builds the fault for a run whose environment it is available in.
	// An error is a bad setting (a window that is not positive, say).
	New func(env Env) (Fault, error)

	// pins is what --target may name for the fault; noPins says why a fault
	// of kind pinNone takes no pins.
	pins   pinKind
	noPins string
	// dataNodes makes a node fault pick among the data nodes only
	// (clusters.Targeter), for the faults that stop a node's process.
	dataNodes bool
}

var registry = struct {
	sync.RWMutex
	specs map[string]*Spec
}{specs: map[string]*Spec{}}

// Register adds a fault. It panics on a spec without New, on one that
// reads a setting no Setting declares, and on a name registered twice
// (see history.RegisterFault): all are programming errors found at
// start-up.
func Register(s Spec) {
	if s.New == nil {
		panic(fmt.Sprintf("nemesis: fault %q has no New", s.Name))
	}
	for _, name := range s.Settings {
		if _, ok := declared[name]; !ok {
			panic(fmt.Sprintf("nemesis: fault %q reads setting %q, which no Setting declares", s.Name, name))
		}
	}
	history.RegisterFault(s.FaultKind)
	registry.Lock()
	defer registry.Unlock()
	registry.specs[s.Name] = &s
}

// Lookup returns the spec of the fault called name.
func Lookup(name string) (Spec, bool) {
	s, ok := lookup(name)
	if !ok {
		return Spec{}, false
	}
	return *s, true
}

func lookup(name string) (*Spec, bool) {
	registry.RLock()
	defer registry.RUnlock()
	s, ok := registry.specs[name]
	return s, ok
}

// Specs returns every registered fault, sorted by name.
func Specs() []Spec {
	registry.RLock()
	defer registry.RUnlock()
	out := make([]Spec, 0, len(registry.specs))
	for _, s := range registry.specs {
		out = append(out, *s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Names lists the fault names Build knows, sorted.
func Names() []string {
	specs := Specs()
	out := make([]string, len(specs))
	for i, s := range specs {
		out[i] = s.Name
	}
	return out
}

// Reads reports whether one of the faults named (parts of combined faults,
// split) reads the setting flag (see Spec.Settings).
func Reads(faults []string, flag string) bool {
	return anySpec(faults, func(s *Spec) bool { return slices.Contains(s.Settings, flag) })
}

// anySpec reports whether the spec of one of the faults named (unknown
// names are passed over) is one that has.
func anySpec(faults []string, has func(s *Spec) bool) bool {
	return slices.ContainsFunc(faults, func(f string) bool {
		s, ok := lookup(f)
		return ok && has(s)
	})
}

// Available reports whether env can apply the fault called name: nil, or
// an error wrapping ErrUnavailable with the reason. An unknown name is an
// error too.
func Available(name string, env Env) error {
	s, ok := lookup(name)
	if !ok {
		return fmt.Errorf("unknown fault %q", name)
	}
	return s.Available(env)
}

// kind gives a fault the names its spec registered: the f of its
// injection and of its heal ops, and the settings it was built with (the
// spec's Settings, as the schedule's Plan records them). Every fault
// embeds one, and Build sets it.
type kind struct {
	spec     *Spec
	settings map[string]string
}

// setKind gives the fault its spec and the settings env gives it; Build
// calls it.
func (k *kind) setKind(s *Spec, env Env) { k.spec, k.settings = s, settingsOf(s, env) }

// plannedName returns the fault's registered name, which a plan records
// (its op may be named otherwise: partition-isolate).
func (k kind) plannedName() string { return k.spec.Name }

// plannedSettings returns the settings the fault was built with.
func (k kind) plannedSettings() map[string]string { return k.settings }

// Name is the f of the injection op.
func (k kind) Name() string { return k.spec.InjectOp() }

// HealName is the f of the healing op.
func (k kind) HealName() string { return k.spec.Heal }
