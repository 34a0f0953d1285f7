package nemesis

import (
	"fmt"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/history"
)

func init() {
	Register(Spec{
		FaultKind: history.FaultKind{Name: "pause-node", Heal: "resume-node", Family: history.FamilyNode,
			Doc: "freezes a data node with SIGSTOP for the window: it answers nothing, then everything at once"},
		Settings:  []string{"window"},
		Needs:     []Ability{NeedPauseNodes},
		New:       newPauseNode,
		pins:      pinNode,
		dataNodes: true,
	})
}

// newPauseNode freezes one node process with SIGSTOP for the window and
// thaws it with SIGCONT: a node that answers nothing, then everything at
// once.
func newPauseNode(env Env) (Fault, error) {
	p := env.Cluster.(clusters.Pauser)
	if env.Window <= 0 {
		return nil, fmt.Errorf("fault window must be positive, got %v", env.Window)
	}
	return &nodeFault{env: env, dur: env.Window, hurt: p.Pause, undo: p.Resume, hurtVerb: "pause", undoVerb: "resume"}, nil
}
