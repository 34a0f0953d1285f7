package run

import (
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/locktest/locktest/clusters/backend"
	"github.com/locktest/locktest/impls"
	"github.com/locktest/locktest/nemesis"
)

// The values some settings of Config take, in the order the help and the
// docs list them. The CLI builds its flag help from these lists, so the help
// names every value Validate accepts.
var (
	// NetModes are the values of Config.Net.
	NetModes = []string{NetAuto, NetNamespaces, NetLoopback}
	// ClockDirections are the values of --clock-direction besides
	// nemesis.ClockEither ("": a coin toss per jump).
	ClockDirections = []string{nemesis.ClockForward, nemesis.ClockBackward}
	// Persistences are the values of Config.Persistence besides "" (the
	// backend's default, which is off).
	Persistences = backend.Persistences
	// Expectations are the values of Config.Expect.
	Expectations = []string{"valid", "invalid"}
)

// hasPersistence reports whether the nodes of backend b have the setting
// Config.Persistence chooses (backend.HasPersistence).
func hasPersistence(b string) bool { return backend.HasPersistence(b) }

// usesNamespaces reports whether the run puts its nodes and clients into
// network namespaces of its own (the only place Config.Subnet is used).
func (c *Config) usesNamespaces() bool {
	if def, err := c.providerOf(); err != nil || !def.Namespaces {
		return false
	}
	return c.Net == NetNamespaces || (c.Net == NetAuto && nemesis.Needs(c.faultParts(), nemesis.NeedNetwork))
}

// hostRE is a host of an explicit partition: a data node (n1, n2, ...) or
// a client host (c0, c1, ...); a backend's other nodes are named by its
// layout.
var hostRE = regexp.MustCompile(`^([nc])(0|[1-9][0-9]*)$`)

// validateSettings checks the settings whose values come from the lists
// above and those that depend on the impl: the persistence, the subnet and
// the hosts of the explicit partition.
func (c *Config) validateSettings(impl impls.Impl) error {
	if c.Persistence != "" {
		if !slices.Contains(Persistences, c.Persistence) {
			return setupErr("--persistence must be %s, got %q", strings.Join(Persistences, ", "), c.Persistence)
		}
		if !hasPersistence(impl.Backend) {
			return setupErr("--persistence is a setting of %s only, and %s runs %s, which has none", strings.Join(backend.WithPersistence(), ", "), c.Impl, impl.Backend)
		}
	}
	if c.Subnet != "" {
		p, err := netip.ParsePrefix(c.Subnet)
		if err != nil || !p.Addr().Is4() || p.Bits() != 24 {
			return setupErr("--subnet %q: want an IPv4 /24 such as 10.77.0.0/24", c.Subnet)
		}
		if !c.usesNamespaces() {
			return setupErr("--subnet is the subnet of the run's network namespaces, and this run has none (they come with --net netns, or with a network fault: %s)",
				networkFaults())
		}
	}
	// A backend's nodes beyond its data nodes (a kubernetes cluster's etcd
	// members e1..) are hosts too, by the names its layout gives them.
	var extra []string
	if l, err := backend.NewLayout(impl.Backend, impl.Nodes, c.ClusterParams); err == nil {
		for _, n := range l.Nodes {
			if !hostRE.MatchString(n.Name) {
				extra = append(extra, n.Name)
			}
		}
	}
	for _, g := range nemesis.Partition.Of(c.FaultSettings) {
		for _, h := range g {
			m := hostRE.FindStringSubmatch(h)
			if slices.Contains(extra, h) {
				continue
			}
			if m == nil || (m[1] == "n" && m[2] == "0") {
				return setupErr("--partition: host %q: want a node (n1, n2, ...%s) or a client host (c0, c1, ...)", h, strings.Join(append([]string{""}, extra...), ", "))
			}
			if k, _ := strconv.Atoi(m[2]); m[1] == "c" && k >= c.Clients {
				return setupErr("--partition: host %s: the run has client hosts c0 to c%d (--clients %d)", h, c.Clients-1, c.Clients)
			}
		}
	}
	return nil
}
