package nemesis

import (
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
	if err := positive("fault window", Window.Of(env)); err != nil {
		return nil, err
	}
	return env.stopNode(Window.Of(env), "pause", plain(p.Pause), "resume", p.Resume), nil
}
