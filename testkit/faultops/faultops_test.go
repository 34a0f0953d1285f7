package faultops

import (
	"slices"
	"testing"

	"github.com/locktest/locktest/history"

	_ "github.com/locktest/locktest/nemesis" // registers the faults whose ops Lines tells apart
)

func TestLines(t *testing.T) {
	nem := func(f string, typ history.Type, targets ...string) history.Op {
		return history.Op{Process: history.NemesisProcess, Type: typ, F: f, Value: history.Value{Targets: targets, Duration: 7}}
	}
	h := history.History{
		nem("kill-node", history.Invoke, "n2"),
		nem("kill-node", history.OK, "n2"),
		{Process: 1, Type: history.OK, F: history.Acquire},
		nem("pause-node", history.OK, "n1", "n3"),
		nem("restart-node", history.OK, "n2"),
		nem("resume-node", history.OK, "n1", "n3"),
	}
	inj, heals := Lines(h)
	if want := []string{"kill-node ok n2 7", "pause-node ok n1,n3 7"}; !slices.Equal(inj, want) {
		t.Errorf("injections = %q, want %q", inj, want)
	}
	if want := []string{"restart-node ok n2 7", "resume-node ok n1,n3 7"}; !slices.Equal(heals, want) {
		t.Errorf("heals = %q, want %q", heals, want)
	}
}
