package nemesis

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/history"
)

func init() {
	Register(Spec{
		FaultKind: history.FaultKind{Name: "slow-disk", Heal: "heal-disk", Family: history.FamilyNode,
			Doc: "makes every fsync and fdatasync of a data node begin --sync-delay late for the window (through the LD_PRELOAD shim)"},
		Settings:  []string{"sync-delay", "window"},
		Needs:     []Ability{NeedSyncDelay},
		New:       newSlowDisk,
		pins:      pinNode,
		dataNodes: true,
	})
}

// maxSyncDelay is the longest sync delay the shim keeps
// (clockshim.MaxSyncDelay).
const maxSyncDelay = 10 * time.Minute

// SyncDelay is how late slow-disk makes each fsync and fdatasync of its
// node begin.
var SyncDelay = NewSetting("sync-delay", Duration, time.Second,
	"how late slow-disk makes each fsync and fdatasync of its node begin",
	Bound[time.Duration]{"must be positive and at most " + maxSyncDelay.String(), func(d time.Duration) bool {
		return d > 0 && d <= maxSyncDelay
	}})

// delayWas is a node's sync delay before a fault changed it.
type delayWas struct {
	node string
	was  time.Duration
}

// newSlowDisk makes every fsync and fdatasync of one data node begin
// SyncDelay late for the window, and records the node and the delay
// ("n3+1.5s"); the heal sets each node it slowed back to the delay it had
// before (none), which also releases the syncs still waiting. A node
// killed and restarted meanwhile stays slow: its new process reads the
// same delay.
func newSlowDisk(env Env) (Fault, error) {
	if err := positive("sync delay and fault window", SyncDelay.Of(env), Window.Of(env)); err != nil {
		return nil, err
	}
	var slowed undoList[delayWas]
	disks := env.Disks
	return env.onNode(Window.Of(env),
		func(_ context.Context, n clusters.Node, v *history.Value, _ *rand.Rand) error {
			d := SyncDelay.Of(env)
			v.Targets = []string{n.Name + signed(d)}
			slowed.add(delayWas{n.Name, disks.SyncDelay(n.Name)}, false)
			return disks.SetSyncDelay(n.Name, d)
		},
		func(context.Context) ([]string, error) {
			// Undo in reverse order, so each node ends at its first delay.
			return slowed.undo(true, func(w delayWas) (string, error) {
				return w.node, disks.SetSyncDelay(w.node, w.was)
			})
		}), nil
}
