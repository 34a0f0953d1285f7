package nemesis

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/locktest/locktest/history"
)

func init() {
	registerShape(Spec{
		FaultKind: history.FaultKind{Name: "partition",
			Doc: "cuts the hosts of the groups --partition gives (n1,n2,c0/n3,c1) from each other, for the window"},
		Settings: []string{"partition"},
		Needs:    []Ability{NeedNetwork, NeedClientGroups},
		pins:     pinNone,
		noPins:   "its groups are given whole by --partition: name the hosts there",
	}, partitionShape{cut: partitionGroups, check: knownHosts})
}

// Partition is the explicit grouping of the partition fault: host names
// per side (ParseGroups, FormatGroups).
var Partition = NewSetting("partition", Groups, nil,
	"the groups of the partition: hosts (n1.., c0..) by commas, groups by slashes, e.g. n1,n2,c0/n3,c1", Bound[[][]string]{})

// partitionGroups applies the grouping given on the command line: hosts of
// different groups are cut; hosts in no group keep everything, and so
// does a host named in two groups, which bridges them (Kleppmann's
// Redlock case: c0 sees n1,n2,n3 and c1 sees n3,n4,n5). It takes no
// pins: the groups name every host.
func partitionGroups(in shapeIn, _ *rand.Rand) ([]Cut, []string, error) {
	groups := in.groups
	if len(groups) < 2 {
		return nil, nil, fmt.Errorf("partition needs at least two groups (--partition n1,n2/n3,c0)")
	}
	var cuts []Cut
	for i := range groups {
		for j := i + 1; j < len(groups); j++ {
			a := slices.DeleteFunc(slices.Clone(groups[i]), func(h string) bool { return slices.Contains(groups[j], h) })
			b := slices.DeleteFunc(slices.Clone(groups[j]), func(h string) bool { return slices.Contains(groups[i], h) })
			if len(a) > 0 && len(b) > 0 {
				cuts = append(cuts, Cut{A: a, B: b})
			}
		}
	}
	if len(cuts) == 0 {
		return nil, nil, fmt.Errorf("partition %v cuts nothing: every group is contained in another", groups)
	}
	return cuts, nil, nil
}

// knownHosts refuses groups that name a host the run does not have.
func knownHosts(in shapeIn) error {
	known := append(slices.Clone(in.nodes), in.clients...)
	for _, g := range in.groups {
		for _, h := range g {
			if !slices.Contains(known, h) {
				return fmt.Errorf("--partition names host %q, which this run does not have (hosts: %s)", h, strings.Join(known, ", "))
			}
		}
	}
	return nil
}
