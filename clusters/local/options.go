package local

import (
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/backend"
)

// Host is where one node runs: the address it binds and, when the run puts
// nodes into network namespaces (for network faults), the namespace. The
// zero Host is the driver's own namespace on loopback.
type Host struct {
	// IP is the address the node binds and clients dial; "" means 127.0.0.1.
	IP string
	// NetNS is the network namespace the node runs in; "" is the driver's.
	NetNS string
}

// Addr returns ip:port on h.
func (h Host) Addr(port int) string {
	return net.JoinHostPort(h.ip(), strconv.Itoa(port))
}

func (h Host) ip() string {
	if h.IP == "" {
		return "127.0.0.1"
	}
	return h.IP
}

// port returns the port a node on h should use: preferred inside a
// namespace of its own (the address is the node's alone), else a free
// loopback port picked now.
func (h Host) port(preferred int) (int, error) {
	if h.NetNS != "" && preferred > 0 {
		return preferred, nil
	}
	return pickPort()
}

// Options configures a local cluster of any backend. Backend-specific
// settings that only one backend understands go in Params.
type Options struct {
	// Nodes is the number of server nodes; 0 means the backend's default.
	Nodes int
	// Dir is the run directory; node n keeps its files under Dir/nodes/<n>.
	Dir string
	// Hosts optionally places node i on Hosts[i]; a missing entry is
	// loopback in the driver's namespace.
	Hosts []Host
	// Persistence is the durability setting of backends that have one
	// (Redis: off, everysec, always).
	Persistence string
	// Exe is the command that runs locktest's own programs (the embedded
	// etcd member): it is run with "node <kind> ..." appended. Empty means
	// this executable.
	Exe []string
	// ExeEnv is added to the environment of Exe.
	ExeEnv []string
	// NodeEnv is added to the environment of every node process (the clock
	// shim's LD_PRELOAD and offset file).
	NodeEnv func(node string) []string
	// TrackSyncs makes the nodes of the backends that can record their
	// syncs (redis) do it, for the power-loss fault: NodeEnv must then
	// preload the clock shim, which writes the record. Other backends
	// ignore it, and say why they cannot cut power (PowerCutReason).
	TrackSyncs bool
	// Params holds backend-specific settings, documented by each backend.
	Params map[string]string
	// Logger receives node starts, exits, kills and pauses; nil discards.
	Logger *slog.Logger
}

// host returns the host of node i (0-based).
func (o Options) host(i int) Host {
	if i < len(o.Hosts) {
		return o.Hosts[i]
	}
	return Host{}
}

// nodeEnv returns the extra environment of the named node.
func (o Options) nodeEnv(node string) []string {
	if o.NodeEnv == nil {
		return nil
	}
	return o.NodeEnv(node)
}

// ownParams are the backend params (--cluster-opt) the local provider
// reads itself, beside the backend's own (backend.Params): where a
// program of the backend's nodes is, for the programs that take one
// (backend.HostProgram.Param: a SQL server's), by backend.
var ownParams = func() map[string][]string {
	out := map[string][]string{}
	for _, b := range backend.All() {
		for _, p := range programsOf(b) {
			if p.Param && !slices.Contains(out[b], p.Name) {
				out[b] = append(out[b], p.Name)
			}
		}
	}
	return out
}()

// programsOf returns the host programs of the nodes of backend b (of
// each kind of its cluster as it comes), in the layout's order.
func programsOf(b string) []backend.HostProgram {
	l, err := backend.NewLayout(b, 0, nil)
	if err != nil {
		return nil
	}
	var out []backend.HostProgram
	for _, n := range l.Nodes {
		if k, err := backend.KindOf(n.Kind); err == nil {
			out = append(out, k.Programs...)
		}
	}
	return out
}

// New returns a not yet started local cluster of backend b, on the
// generic Processes. Its size and params are checked first as the
// backend's definition checks them (backend.NewLayout), for the same
// one-line refusal on every provider.
func New(b string, opts Options) (clusters.Cluster, error) {
	p, err := NewProcesses(b, opts)
	if err != nil {
		return nil, err // not a nil *Processes in a non-nil Cluster
	}
	return p, nil
}

// The roles of a replicated Redis's nodes, as Nodes and Role report
// them, and the name its sentinels monitor the master under.
const (
	RoleMaster         = backend.RoleMaster
	RoleReplica        = backend.RoleReplica
	RoleSentinel       = backend.RoleSentinel
	SentinelMasterName = backend.SentinelMasterName
)

// writeLaunch makes the directories of a node's launch and writes its
// files (backend.Launch), but those marked Once unless first: the first
// start writes them, and the server rewrites them as it runs.
func writeLaunch(l backend.Launch, first bool) error {
	for _, d := range l.Dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	for _, f := range l.Files {
		if f.Once && !first {
			continue
		}
		if err := os.WriteFile(f.Path, []byte(f.Data), 0o644); err != nil {
			return err
		}
	}
	return nil
}
