package history

import (
	"fmt"
	"slices"
	"sort"
	"sync"
)

// Family groups faults by what they act on, and so by what a platform must
// be able to do to apply them.
type Family string

// The fault families.
const (
	// FamilyNone is a fault that acts on nothing (the noop fault).
	FamilyNone Family = "none"
	// FamilyProcess faults act on the client (worker) processes.
	FamilyProcess Family = "process"
	// FamilyNode faults act on the lock-service node processes.
	FamilyNode Family = "node"
	// FamilyNetwork faults act on the network between hosts.
	FamilyNetwork Family = "network"
	// FamilyClock faults act on wall clocks.
	FamilyClock Family = "clock"
)

// Families lists the fault families in the order reports show them.
var Families = []Family{FamilyProcess, FamilyNode, FamilyNetwork, FamilyClock, FamilyNone}

// FaultKind is what a reader of a history needs to know of one fault: the
// f of its injection and heal ops, what it acts on, and whether its ok
// injection proves that the processes it names died. Each fault of the
// nemesis registers its kind once, in the file that defines the fault; the
// checkers and reports look kinds up by an op's f and keep no list of
// their own.
type FaultKind struct {
	// Name is the fault's name, as --faults and scenario files give it.
	Name string
	// Op is the f of its injection op; empty means Name.
	Op string
	// Heal is the f of the op that ends it; several faults may share one
	// heal (heal-network ends every network fault).
	Heal string
	// Family is what it acts on.
	Family Family
	// Doc says in one line what it does.
	Doc string
	// Kills says that an ok injection proves the death of the client
	// processes it names in Value.Targets ("p3"): from then on they can no
	// longer act, and the locks their sessions held are free.
	Kills bool
}

// InjectOp returns the f of the fault's injection op.
func (k FaultKind) InjectOp() string {
	if k.Op != "" {
		return k.Op
	}
	return k.Name
}

var faults = struct {
	sync.RWMutex
	byName map[string]FaultKind
	byOp   map[string]FaultKind
	heals  map[string]bool
}{byName: map[string]FaultKind{}, byOp: map[string]FaultKind{}, heals: map[string]bool{}}

// RegisterFault records a fault kind. It panics on a kind without a name,
// heal or family, and on a name or injection op registered twice: both are
// programming errors found at start-up.
func RegisterFault(k FaultKind) {
	if k.Name == "" || k.Heal == "" || k.Family == "" {
		panic(fmt.Sprintf("history: fault kind %+v lacks a name, heal or family", k))
	}
	faults.Lock()
	defer faults.Unlock()
	if _, dup := faults.byName[k.Name]; dup {
		panic("history: fault " + k.Name + " registered twice")
	}
	if _, dup := faults.byOp[k.InjectOp()]; dup {
		panic("history: fault op " + k.InjectOp() + " registered twice")
	}
	faults.byName[k.Name] = k
	faults.byOp[k.InjectOp()] = k
	faults.heals[k.Heal] = true
}

// FaultNamed returns the kind registered under name.
func FaultNamed(name string) (FaultKind, bool) {
	faults.RLock()
	defer faults.RUnlock()
	k, ok := faults.byName[name]
	return k, ok
}

// FaultOfOp returns the kind whose injection op has f.
func FaultOfOp(f string) (FaultKind, bool) {
	faults.RLock()
	defer faults.RUnlock()
	k, ok := faults.byOp[f]
	return k, ok
}

// IsHeal reports whether f is the f of an op that ends a fault.
func IsHeal(f string) bool {
	faults.RLock()
	defer faults.RUnlock()
	return faults.heals[f]
}

// Kills reports whether op o is the ok completion of a nemesis injection
// that proves the death of the processes in its targets.
func Kills(o Op) bool {
	if !o.IsNemesis() || o.Type != OK {
		return false
	}
	k, ok := FaultOfOp(o.F)
	return ok && k.Kills
}

// FaultKinds returns every registered kind, sorted by name.
func FaultKinds() []FaultKind {
	faults.RLock()
	defer faults.RUnlock()
	out := make([]FaultKind, 0, len(faults.byName))
	for _, k := range faults.byName {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// HealOps returns the f of every heal op, sorted, each once.
func HealOps() []string {
	faults.RLock()
	defer faults.RUnlock()
	out := make([]string, 0, len(faults.heals))
	for h := range faults.heals {
		out = append(out, h)
	}
	slices.Sort(out)
	return out
}
