package docker

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/moby/moby/client"
)

// Leftover is a container or network that a run made.
type Leftover struct {
	// Kind is "container" or "network".
	Kind string
	ID   string
	Name string
	// Run is the run's id (LabelRun).
	Run string
	// Orphan is set when the run's driver is gone (see LabelOwnerPID).
	Orphan bool
}

// Find lists every container and network that carries LabelRun, with
// whether its owner is gone. It never lists images: built images are kept.
func (e *Engine) Find(ctx context.Context) ([]Leftover, error) {
	f := client.Filters{}.Add("label", LabelRun)
	var out []Leftover
	cs, err := e.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		return nil, fmt.Errorf("docker: list containers: %s", firstLine(err))
	}
	for _, c := range cs.Items {
		name := ""
		if len(c.Names) > 0 {
			name = c.Names[0]
		}
		out = append(out, Leftover{Kind: "container", ID: c.ID, Name: trimSlash(name), Run: c.Labels[LabelRun], Orphan: !ownerAlive(c.Labels)})
	}
	ns, err := e.cli.NetworkList(ctx, client.NetworkListOptions{Filters: f})
	if err != nil {
		return nil, fmt.Errorf("docker: list networks: %s", firstLine(err))
	}
	for _, n := range ns.Items {
		out = append(out, Leftover{Kind: "network", ID: n.ID, Name: n.Name, Run: n.Labels[LabelRun], Orphan: !ownerAlive(n.Labels)})
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Run != out[j].Run {
			return out[i].Run < out[j].Run
		}
		return out[i].Kind < out[j].Kind // containers before networks
	})
	return out, nil
}

// OfRun returns the leftovers of one run.
func OfRun(ls []Leftover, run string) []Leftover {
	var out []Leftover
	for _, l := range ls {
		if l.Run == run {
			out = append(out, l)
		}
	}
	return out
}

// Orphans returns the leftovers whose driver is gone.
func Orphans(ls []Leftover) []Leftover {
	var out []Leftover
	for _, l := range ls {
		if l.Orphan {
			out = append(out, l)
		}
	}
	return out
}

// Cleanup removes the containers (first) and networks of runs whose driver
// is gone, found by their labels, and returns what it removed. It touches
// nothing of a run that is still going and nothing without LabelRun: not
// other containers, not images.
func (e *Engine) Cleanup(ctx context.Context) ([]Leftover, error) {
	all, err := e.Find(ctx)
	if err != nil {
		return nil, err
	}
	var removed []Leftover
	var errs []error
	for _, l := range Orphans(all) {
		switch l.Kind {
		case "container":
			_, err = e.cli.ContainerRemove(ctx, l.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
		case "network":
			_, err = e.cli.NetworkRemove(ctx, l.ID, client.NetworkRemoveOptions{})
		}
		if err != nil && !isNotFound(err) {
			errs = append(errs, fmt.Errorf("docker: remove %s %s: %s", l.Kind, l.Name, firstLine(err)))
			continue
		}
		removed = append(removed, l)
	}
	return removed, errors.Join(errs...)
}

func trimSlash(s string) string {
	if len(s) > 0 && s[0] == '/' {
		return s[1:]
	}
	return s
}
