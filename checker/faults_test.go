package checker

// The checkers read what a nemesis op means (does it heal a fault, does it
// prove a client's death) from the fault registry, which the nemesis's
// faults fill when their package is linked in, as it is in locktest.
import (
	"testing"

	"github.com/locktest/locktest/history"
	_ "github.com/locktest/locktest/nemesis"
)

// A fault defined in one file of the nemesis (noop, which no checker
// names) opens a fault window at its injection and closes it at its heal,
// read from the registry.
func TestFaultWindowsOfARegisteredFault(t *testing.T) {
	h := history.History{
		{Index: 0, Type: history.Invoke, Process: history.NemesisProcess, F: "noop", Time: 10},
		{Index: 1, Type: history.OK, Process: history.NemesisProcess, F: "noop", Time: 11},
		{Index: 2, Type: history.Invoke, Process: history.NemesisProcess, F: "noop-done", Time: 50},
		{Index: 3, Type: history.OK, Process: history.NemesisProcess, F: "noop-done", Time: 51},
	}
	got := faultWindows(history.NewTable(h), 100)
	if len(got) != 1 || got[0] != (span{10, 51}) {
		t.Errorf("fault windows %v, want [{10 51}]", got)
	}
}
