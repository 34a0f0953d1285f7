package backend

import (
	"context"
	"fmt"
	"slices"

	"github.com/locktest/locktest/clusters"
)

// Outline is a backend's cluster as its Layout describes it, before any
// provider places or starts it: its nodes by name, in the layout's order,
// each with the role it starts with where the backend knows it
// (Service.StartRole), and no address. Through NodeRoles it tells the
// roles each node can ever have (Roles) and the nodes a fault that stops
// a process picks from (Targets), as every provider's cluster of the same
// layout does: a run checks its --target pins against it before anything
// starts (nemesis.CheckTargets). It cannot be started, and its nodes have
// no role now (Role is an error).
type Outline struct {
	NodeRoles
}

var (
	_ clusters.Cluster    = Outline{}
	_ clusters.RoleReader = Outline{}
	_ clusters.Targeter   = Outline{}
)

// NewOutline returns the outline of backend b's cluster of nodes data
// nodes (0: the backend's default) made with params. The params the
// backend reads (Service.Params) are checked as NewLayout checks them;
// the others, a provider's own or unknown, do not shape the cluster and
// are left to the provider that reads them.
func NewOutline(b string, nodes int, params map[string]string) (Outline, error) {
	s, _ := ServiceOf(b)
	var others []string
	for k := range params {
		if !slices.Contains(s.Params, k) {
			others = append(others, k)
		}
	}
	l, err := NewLayout(b, nodes, params, others...)
	if err != nil {
		return Outline{}, err
	}
	o := Outline{NodeRoles{Layout: l, Provider: "outline"}}
	o.List = o.Nodes
	return o, nil
}

// Nodes returns the layout's nodes, each with its name and the role it
// starts with, or "" where the backend knows none before its cluster forms.
func (o Outline) Nodes() []clusters.Node {
	var r Roster
	out := make([]clusters.Node, len(o.Layout.Nodes))
	for i, n := range o.Layout.Nodes {
		out[i] = clusters.Node{Name: n.Name, Role: r.Role(o.Layout, n.Name)}
	}
	return out
}

// Role is an error: an outline's nodes do not run.
func (o Outline) Role(_ context.Context, n clusters.Node) (string, error) {
	return "", fmt.Errorf("outline of %s: node %s does not run: it has no role now", o.Layout.Backend, n.Name)
}

// Start is an error: an outline is not a cluster a provider placed.
func (o Outline) Start(context.Context) error {
	return fmt.Errorf("outline of %s: it cannot be started; a provider makes the cluster", o.Layout.Backend)
}

// Stop does nothing: an outline started nothing.
func (o Outline) Stop(context.Context) error { return nil }
