package checker

// The checkers read what a nemesis op means (does it heal a fault, does it
// prove a client's death) from the fault registry, which the nemesis's
// faults fill when their package is linked in, as it is in locktest.
import (
	"context"
	"testing"

	"github.com/locktest/locktest/history"
	_ "github.com/locktest/locktest/nemesis"
)

// A fault defined in one file of the nemesis (noop, which no checker
// names) opens a fault window at its injection and closes it at its heal,
// read from the registry: liveness counts one window, and the recovery
// from its heal (at 51 ns) to the next grant (at 80 ns).
func TestFaultWindowsOfARegisteredFault(t *testing.T) {
	x := history.Value{Lock: "x"}
	h := history.History{
		{Index: 0, Type: history.Invoke, Process: 0, F: history.Acquire, Time: 1, Value: x},
		{Index: 1, Type: history.OK, Process: 0, F: history.Acquire, Time: 5, Value: x},
		{Index: 2, Type: history.Invoke, Process: 0, F: history.Release, Time: 6, Value: x},
		{Index: 3, Type: history.OK, Process: 0, F: history.Release, Time: 7, Value: x},
		{Index: 4, Type: history.Invoke, Process: history.NemesisProcess, F: "noop", Time: 10},
		{Index: 5, Type: history.OK, Process: history.NemesisProcess, F: "noop", Time: 11},
		{Index: 6, Type: history.Invoke, Process: history.NemesisProcess, F: "noop-done", Time: 50},
		{Index: 7, Type: history.OK, Process: history.NemesisProcess, F: "noop-done", Time: 51},
		{Index: 8, Type: history.Invoke, Process: 0, F: history.Acquire, Time: 70, Value: x},
		{Index: 9, Type: history.OK, Process: 0, F: history.Acquire, Time: 80, Value: x},
	}
	r := Liveness{}.Check(context.Background(), history.NewTable(h))
	if r.Stats["fault_windows"] != 1 || r.Stats["recovery_after_heal_max_s"] != 29e-9 {
		t.Errorf("fault_windows %v, recovery_after_heal_max_s %v; want 1 and 29e-9 (stats %v)",
			r.Stats["fault_windows"], r.Stats["recovery_after_heal_max_s"], r.Stats)
	}
}
