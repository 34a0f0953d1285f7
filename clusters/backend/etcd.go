package backend

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/locktest/locktest/clusters"
)

// The cluster params (--cluster-opt) of the etcd backend.
const (
	// EtcdParamTickMs sets the raft heartbeat interval, in milliseconds.
	EtcdParamTickMs = "tick-ms"
	// EtcdParamElectionMs sets the raft election timeout, in milliseconds.
	EtcdParamElectionMs = "election-ms"
)

// EtcdParams are the params ParseEtcdParams reads.
var EtcdParams = []string{EtcdParamTickMs, EtcdParamElectionMs}

// EtcdDefaultNodes is the size of an etcd cluster when none is asked for.
const EtcdDefaultNodes = 3

// EtcdTiming is the raft timing of an etcd cluster's members.
type EtcdTiming struct {
	// TickMs is the heartbeat interval and ElectionMs the election
	// timeout, in milliseconds.
	TickMs, ElectionMs int
}

// DefaultEtcdTiming is a heartbeat every 25ms and a 250ms election
// timeout: they elect the first leader of a fresh 3-member cluster within
// a few hundred milliseconds, and make etcd's smallest lease TTL (1.5
// election timeouts, rounded up to whole seconds) one second.
var DefaultEtcdTiming = EtcdTiming{TickMs: 25, ElectionMs: 250}

// ParseEtcdParams returns the timing params sets over DefaultEtcdTiming.
// A param it does not read, a value that is not a positive number of
// milliseconds, and an election timeout shorter than 5 heartbeats are
// errors that name the param and its value.
func ParseEtcdParams(params map[string]string) (EtcdTiming, error) {
	t := DefaultEtcdTiming
	for _, k := range slices.Sorted(maps.Keys(params)) {
		v := params[k]
		n, err := strconv.Atoi(v)
		switch {
		case !slices.Contains(EtcdParams, k):
			return t, fmt.Errorf("etcd: unknown cluster param %q (known: %s)", k, strings.Join(EtcdParams, ", "))
		case err != nil || n <= 0:
			return t, fmt.Errorf("etcd: cluster param %s=%q must be a positive number of milliseconds", k, v)
		case k == EtcdParamTickMs:
			t.TickMs = n
		default:
			t.ElectionMs = n
		}
	}
	return t, t.Check()
}

// Check refuses a timing raft cannot run with: a heartbeat that is not
// positive, or an election timeout shorter than 5 heartbeats.
func (t EtcdTiming) Check() error {
	if t.TickMs <= 0 || t.ElectionMs < 5*t.TickMs {
		return fmt.Errorf("etcd: election timeout %dms must be at least 5 heartbeats of %dms", t.ElectionMs, t.TickMs)
	}
	return nil
}

// NodeArgs are the timing flags of locktest's own etcd member program
// (`locktest node etcd`).
func (t EtcdTiming) NodeArgs() []string {
	return []string{"--tick-ms", strconv.Itoa(t.TickMs), "--election-ms", strconv.Itoa(t.ElectionMs)}
}

// UpstreamArgs are the same timing as the upstream etcd binary's flags.
func (t EtcdTiming) UpstreamArgs() []string {
	return []string{"--heartbeat-interval", strconv.Itoa(t.TickMs), "--election-timeout", strconv.Itoa(t.ElectionMs)}
}

// etcdNoClockShim is why the clock shim cannot move an etcd member's
// clock.
const etcdNoClockShim = "etcd nodes are Go programs, which read the wall clock without libc: the LD_PRELOAD clock shim cannot move them (not applicable)"

// The roles of etcd members, as EtcdRole reads them.
const (
	EtcdLeader   = "leader"
	EtcdFollower = "follower"
)

// EtcdRoles returns the roles a member can have: it leads or follows.
func EtcdRoles() []string { return []string{EtcdLeader, EtcdFollower} }

// Etcd is the backend of an etcd cluster, and KindEtcd its members,
// locktest's node program embedding an etcd server, with their client
// and peer ports.
const (
	Etcd         = "etcd"
	KindEtcd     = "etcd"
	EtcdPort     = 2379
	EtcdPeerPort = 2380
)

// ProductEtcd is the product an etcd member is (Versions).
const ProductEtcd = "etcd"

func init() {
	Register(Service{
		Name: Etcd, Rank: 4, Kind: KindEtcd, DefaultNodes: EtcdDefaultNodes,
		Params: EtcdParams,
		Configure: func(l *Layout, nodes int, params map[string]string) (int, error) {
			var err error
			l.Etcd, err = ParseEtcdParams(params)
			return nodes, err
		},
		Roles: func(Layout, string) []string { return EtcdRoles() },
		Role: func(ctx context.Context, _ Layout, _ []clusters.Node, _, addr string) (string, error) {
			return EtcdRole(ctx, addr)
		},
		Locks:           Leases,
		Version:         askEtcd,
		Reset:           resetEtcd,
		Residue:         etcdResidue,
		ClockShimReason: etcdNoClockShim,
		SyncsRecorded:   true,
	}, etcdKind)
}

// etcdKind is an etcd member: locktest's node program (`locktest node
// etcd`, the embedded server) where the host has it, else the upstream
// etcd binary with its own flags: an image without locktest's, or the
// local provider told where the host's etcd is (--cluster-opt
// etcd=/usr/bin/etcd, Debian's etcd-server), which runs it in place of
// the node program. Members have fixed peer URLs, so the initial cluster
// is known before any starts.
var etcdKind = &Kind{
	Name:         KindEtcd,
	Ports:        []Port{{Name: "client", Base: EtcdPort, Step: 2}, {Name: "peer", Base: EtcdPeerPort, Step: 2}},
	Ready:        etcdReady,
	Program:      NodeProgram,
	ReadyTimeout: 60 * time.Second,
	PeerServing:  etcdPeerServing,
	Log:          "etcd.log",
	Install:      "locktest uploads its node program; the upstream etcd is installed with the etcd-server package",
	Programs:     []HostProgram{{Name: "etcd", Param: true}},
	Image:        Image{Official: "gcr.io/etcd-development/etcd:v3.5.21"},
	Launch: func(p Placement) (Launch, error) {
		var initial []string
		for _, m := range p.Peers {
			if p.Layout.Kind(m.Name) == KindEtcd { // a kubernetes cluster's apiservers are peers too
				initial = append(initial, m.Name+"=http://"+m.Addr(1))
			}
		}
		client, peer := "http://"+p.Node.Addr(0), "http://"+p.Node.Addr(1)
		var argv []string
		if p.NodeProgram != nil {
			argv = append(append(argv, p.NodeProgram...), "node", "etcd", "--name", p.Node.Name, "--data-dir", p.DataDir,
				"--listen-client-urls", client, "--listen-peer-urls", peer,
				"--initial-cluster", strings.Join(initial, ","))
			if p.LogFile != "" {
				argv = append(argv, "--log-file", p.LogFile)
			}
			argv = append(argv, p.Layout.Etcd.NodeArgs()...)
		} else {
			argv = append([]string{p.Bin("etcd"),
				"--name", p.Node.Name, "--data-dir", p.DataDir,
				"--listen-client-urls", client, "--advertise-client-urls", client,
				"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
				"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-token", "locktest",
				"--initial-cluster-state", "new",
			}, p.Layout.Etcd.UpstreamArgs()...)
		}
		return Launch{Argv: argv}, nil
	},
}

// etcdPeerServing asks the etcd member whose peer address is addr for
// its version over its peer port. A new member asks each peer whether it
// joined already, and waits a whole second for a peer whose port is open
// but not yet served: the members of a new cluster start in turn.
func etcdPeerServing(ctx context.Context, addr string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/version", nil)
	if err != nil {
		return err
	}
	resp, err := (&http.Client{Timeout: 100 * time.Millisecond}).Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// askEtcd calls the Maintenance API's Status on the member itself.
func askEtcd(ctx context.Context, addr string, _ map[string]string) (string, string, error) {
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{addr}, DialTimeout: VersionTimeout, Logger: zap.NewNop()})
	if err != nil {
		return "", "", fmt.Errorf("etcd client: %w", err)
	}
	defer c.Close()
	st, err := c.Status(ctx, addr)
	if err != nil {
		return "", "", fmt.Errorf("status: %w", err)
	}
	if st.Version == "" {
		return "", "", errors.New("status: the member reports no version")
	}
	return ProductEtcd, st.Version, nil
}

// etcdReady asks the member at addr for its status: it must name a leader
// and report no error.
func etcdReady(ctx context.Context, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, etcdTimeout)
	defer cancel()
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{addr}, DialTimeout: etcdTimeout, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer c.Close()
	return EtcdStatusReady(ctx, c, addr)
}

// EtcdStatusReady asks the member at addr, through the client c, for its
// status: it must name a leader and report no error. It is Ready's query
// for a caller that keeps a client across its polls.
func EtcdStatusReady(ctx context.Context, c *clientv3.Client, addr string) error {
	st, err := c.Status(ctx, addr)
	switch {
	case err != nil:
		return err
	case len(st.Errors) > 0:
		return fmt.Errorf("member reports %s", strings.Join(st.Errors, "; "))
	case st.Leader == 0:
		return errors.New("no leader yet")
	}
	return nil
}

// etcdTimeout bounds one member's answer to EtcdRole when the caller's
// context has no earlier deadline.
const etcdTimeout = time.Second

// EtcdRole asks the etcd member at addr for its status (the Maintenance
// API's Status) and returns "leader" when the leader it knows is itself
// and "follower" when it knows another member as leader. A member that
// knows no leader (an election is under way), reports errors or does not
// answer within a second is an error.
func EtcdRole(ctx context.Context, addr string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, etcdTimeout)
	defer cancel()
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{addr}, DialTimeout: etcdTimeout, Logger: zap.NewNop()})
	if err != nil {
		return "", fmt.Errorf("etcd %s: %w", addr, err)
	}
	defer c.Close()
	st, err := c.Status(ctx, addr)
	switch {
	case err != nil:
		return "", fmt.Errorf("etcd %s: status: %w", addr, err)
	case len(st.Errors) > 0:
		return "", fmt.Errorf("etcd %s reports %s", addr, strings.Join(st.Errors, "; "))
	case st.Leader == 0:
		return "", fmt.Errorf("etcd %s knows no leader", addr)
	case st.Header != nil && st.Leader == st.Header.MemberId:
		return EtcdLeader, nil
	}
	return EtcdFollower, nil
}

// resetEtcd is etcd's Reset: it deletes every key and revokes every lease
// (the impls' lock keys and their sessions' leases) through the cluster,
// and returns once every member's own store (a serializable read) holds
// no key. The revision goes on from where it was: a fresh cluster's
// would start at 1, but tokens drawn from it only have to grow.
func resetEtcd(ctx context.Context, l Layout, nodes []clusters.Node) error {
	members := l.OfKind(nodes, KindEtcd)
	c, err := etcdClient(members)
	if err != nil {
		return fmt.Errorf("%s: reset: %w", l.Backend, err)
	}
	defer c.Close()
	qctx, cancel := context.WithTimeout(ctx, resetTimeout)
	defer cancel()
	ls, err := c.Leases(qctx)
	if err != nil {
		return fmt.Errorf("%s: reset: list leases: %w", l.Backend, err)
	}
	for _, lease := range ls.Leases {
		if _, err := c.Revoke(qctx, lease.ID); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return fmt.Errorf("%s: reset: revoke lease %x: %w", l.Backend, lease.ID, err)
		}
	}
	if _, err := c.Delete(qctx, "", clientv3.WithPrefix()); err != nil {
		return fmt.Errorf("%s: reset: delete every key: %w", l.Backend, err)
	}
	for _, m := range members {
		mc, err := etcdClient([]clusters.Node{m})
		if err != nil {
			return fmt.Errorf("%s: reset %s: %w", l.Backend, m.Name, err)
		}
		err = Poll(ctx, func() error {
			r, err := mc.Get(ctx, "", clientv3.WithPrefix(), clientv3.WithCountOnly(), clientv3.WithSerializable())
			if err == nil && r.Count > 0 {
				err = fmt.Errorf("%d keys left", r.Count)
			}
			return err
		})
		mc.Close()
		if err != nil {
			return fmt.Errorf("%s: reset %s: %w", l.Backend, m.Name, err)
		}
	}
	return nil
}

// etcdResidue is etcd's Residue: the keys in each member's own store (a
// serializable read of that member alone), and the leases the cluster
// grants.
func etcdResidue(ctx context.Context, l Layout, nodes []clusters.Node) ([]string, error) {
	var out []string
	members := l.OfKind(nodes, KindEtcd)
	for _, m := range members {
		keys, err := func() ([]string, error) {
			c, err := etcdClient([]clusters.Node{m})
			if err != nil {
				return nil, err
			}
			defer c.Close()
			qctx, cancel := context.WithTimeout(ctx, resetTimeout)
			defer cancel()
			r, err := c.Get(qctx, "", clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithSerializable())
			if err != nil {
				return nil, err
			}
			var keys []string
			for _, kv := range r.Kvs {
				keys = append(keys, string(kv.Key))
			}
			return keys, nil
		}()
		if err != nil {
			return out, fmt.Errorf("%s: residue of %s: %w", l.Backend, m.Name, err)
		}
		out = append(out, listed(fmt.Sprintf("%s %s: key ", l.Backend, m.Name), keys)...)
	}
	c, err := etcdClient(members)
	if err != nil {
		return out, fmt.Errorf("%s: residue: %w", l.Backend, err)
	}
	defer c.Close()
	qctx, cancel := context.WithTimeout(ctx, resetTimeout)
	defer cancel()
	ls, err := c.Leases(qctx)
	if err != nil {
		return out, fmt.Errorf("%s: residue: list leases: %w", l.Backend, err)
	}
	var ids []string
	for _, lease := range ls.Leases {
		ids = append(ids, fmt.Sprintf("%x", lease.ID))
	}
	return append(out, listed(l.Backend+": lease ", ids)...), nil
}

// etcdClient is a client of the members, quiet.
func etcdClient(members []clusters.Node) (*clientv3.Client, error) {
	var eps []string
	for _, m := range members {
		eps = append(eps, m.Addr)
	}
	return clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: resetTimeout, Logger: zap.NewNop()})
}
