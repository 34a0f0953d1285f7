package backend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/internal/natsbucket"
)

// Nats is the backend of a NATS JetStream cluster, and KindNats its
// servers: locktest's node program embedding nats-server
// (`locktest node nats`), with JetStream on. Each server has a client
// port and a route port for the cluster's mesh, and serves its monitoring
// endpoints, which the role query reads, NatsHTTPOffset above its client
// port (8222 beside 4222, on every provider).
const (
	Nats           = "nats"
	KindNats       = "nats"
	NatsPort       = 4222
	NatsRoutePort  = 6222
	NatsHTTPOffset = 4000
	ProductNats    = "nats-server"
	NatsMaxNodes   = 5
	NatsParamSync  = "sync"
	natsTimeout    = 2 * time.Second
	natsLogName    = "nats.log"
	natsNoShimText = "NATS servers are Go programs, which read the wall clock without libc: the LD_PRELOAD clock shim cannot move them (not applicable)"
)

// NatsDefaultNodes is the size of a NATS cluster when none is asked for.
const NatsDefaultNodes = 3

// The roles of a NATS server, as NatsRole reads them: the leader of the
// lock bucket's stream (which orders every write to a lock), the leader of
// the JetStream meta group (which places streams) when it does not lead
// the stream too, or a follower of both.
const (
	NatsLeader     = "leader"
	NatsMetaLeader = "meta-leader"
	NatsFollower   = "follower"
)

// NatsSync is JetStream's sync setting, the backend's sync param: how
// often a server flushes its stream files to disk. The zero NatsSync is the
// server's default, every two minutes, during which a write the cluster
// acknowledged is in the page cache only.
type NatsSync struct {
	// Always syncs every write before it is acknowledged
	// (sync_interval: always).
	Always bool
	// Interval is the time between syncs; 0 is the server's default.
	Interval time.Duration
}

// String is the setting as the sync param and the node program's --sync
// flag write it: "", "always" or a duration.
func (s NatsSync) String() string {
	switch {
	case s.Always:
		return "always"
	case s.Interval > 0:
		return s.Interval.String()
	}
	return ""
}

// ParseNatsSync reads the sync param: "" (the server's default), "always",
// or a positive duration. Anything else is an error naming the param.
func ParseNatsSync(v string) (NatsSync, error) {
	switch v = strings.TrimSpace(v); v {
	case "":
		return NatsSync{}, nil
	case "always":
		return NatsSync{Always: true}, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return NatsSync{}, fmt.Errorf("nats: cluster param %s=%q must be always or a positive duration (the server's default is 2m)", NatsParamSync, v)
	}
	return NatsSync{Interval: d}, nil
}

func init() {
	Register(Service{
		Name: Nats, Rank: 8, Kind: KindNats, DefaultNodes: NatsDefaultNodes,
		Params: []string{NatsParamSync},
		Configure: func(l *Layout, nodes int, params map[string]string) (int, error) {
			if nodes > NatsMaxNodes {
				return 0, fmt.Errorf("nats: %d nodes: a JetStream stream has at most %d replicas, one on each server", nodes, NatsMaxNodes)
			}
			_, err := ParseNatsSync(params[NatsParamSync])
			return nodes, err
		},
		Roles: func(l Layout, _ string) []string {
			if len(l.Nodes) == 1 {
				return nil
			}
			return []string{NatsLeader, NatsMetaLeader, NatsFollower}
		},
		Role: func(ctx context.Context, l Layout, nodes []clusters.Node, name, addr string) (string, error) {
			return NatsRole(ctx, addr, name, natsHTTPAddr(nodes, name))
		},
		Form:            formNats,
		PortOffsets:     []int{NatsHTTPOffset},
		Locks:           Leases,
		Version:         askNats,
		Product:         func(clusters.Node) string { return ProductNats },
		ClockShimReason: natsNoShimText,
		SyncsRecorded:   true,
		Reset:           resetNats,
		Residue:         natsResidue,
	}, natsKind)
}

// natsKind is a NATS server: locktest's node program, which embeds
// nats-server with JetStream. A cluster of more than one server is a full
// mesh of routes, each server given the others' route addresses.
var natsKind = &Kind{
	Name:         KindNats,
	Ports:        []Port{{Name: "client", Base: NatsPort, Step: 1}, {Name: "route", Base: NatsRoutePort, Step: 1}},
	Ready:        natsReady,
	Program:      NodeProgram,
	ReadyTimeout: 60 * time.Second,
	Log:          natsLogName,
	Install:      "locktest uploads its node program, which embeds nats-server",
	Launch: func(p Placement) (Launch, error) {
		if p.NodeProgram == nil {
			return Launch{}, errors.New("nats: the servers run in locktest's node program, which this host lacks (build locktest's images)")
		}
		sync, err := ParseNatsSync(p.Layout.Params[NatsParamSync])
		if err != nil {
			return Launch{}, err
		}
		bind := func(port int) string { return p.Bind + ":" + strconv.Itoa(port) }
		argv := append(append([]string{}, p.NodeProgram...), "node", "nats", "--name", p.Node.Name, "--store-dir", p.DataDir,
			"--listen", bind(p.Node.Ports[0]), "--advertise", p.Node.IP, "--monitor", bind(p.Node.Ports[0]+NatsHTTPOffset))
		if len(p.Peers) > 1 {
			var routes []string
			for _, m := range p.Peers {
				if m.Name != p.Node.Name {
					routes = append(routes, m.Addr(1))
				}
			}
			argv = append(argv, "--cluster-listen", bind(p.Node.Ports[1]), "--routes", strings.Join(routes, ","))
		}
		if s := sync.String(); s != "" {
			argv = append(argv, "--sync", s)
		}
		if p.LogFile != "" {
			argv = append(argv, "--log-file", p.LogFile)
		}
		return Launch{Argv: argv}, nil
	},
}

// natsConnect connects to the server at addr alone, with no reconnection:
// each question is asked of that server.
func natsConnect(addr string) (*nats.Conn, error) {
	return nats.Connect("nats://"+addr, nats.Timeout(natsTimeout), nats.NoReconnect(), nats.DontRandomize(), nats.Name("locktest-probe"))
}

// natsJetStream connects to the server at addr alone (natsConnect) and
// returns its JetStream API and the function that closes the connection.
func natsJetStream(addr string) (jetstream.JetStream, func(), error) {
	nc, err := natsConnect(addr)
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return js, nc.Close, nil
}

// natsReady asks the server at addr for JetStream's account information,
// which it answers only once the JetStream meta group has a leader.
func natsReady(ctx context.Context, addr string) error {
	js, done, err := natsJetStream(addr)
	if err != nil {
		return err
	}
	defer done()
	ctx, cancel := context.WithTimeout(ctx, natsTimeout)
	defer cancel()
	_, err = js.AccountInfo(ctx)
	return err
}

// formNats starts the servers together, then makes the lock bucket
// (natsbucket) with a replica on each, and returns once its stream has a
// leader and every replica is current: a lock taken at once is then
// replicated as it will be during the run.
func formNats(ctx context.Context, _ *Roster, l Layout, f Formation) error {
	if err := f.Start(ctx, l.names("")); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, ReplicatedReadyTimeout)
	defer cancel()
	nodes := f.Nodes()
	var last error
	for {
		if last = natsBucketReady(ctx, nodes); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s nats: the lock bucket's stream %s is not replicated on %d servers after %v: %v", f.Provider, natsbucket.Stream, len(nodes), ReplicatedReadyTimeout, last)
		case <-time.After(ReadyPoll):
		}
	}
}

// natsBucketReady makes the lock bucket through the first server that
// answers, where it is missing, and says whether its stream has a leader
// and a current replica on every server.
func natsBucketReady(ctx context.Context, nodes []clusters.Node) error {
	var errs []error
	for _, n := range nodes {
		err := func() error {
			js, done, err := natsJetStream(n.Addr)
			if err != nil {
				return err
			}
			defer done()
			qctx, cancel := context.WithTimeout(ctx, natsTimeout)
			defer cancel()
			if _, err := natsbucket.Open(qctx, js, len(nodes)); err != nil {
				return err
			}
			s, err := js.Stream(qctx, natsbucket.Stream)
			if err != nil {
				return err
			}
			return natsReplicated(s.CachedInfo(), len(nodes))
		}()
		if err == nil {
			return nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", n.Name, err))
	}
	return errors.Join(errs...)
}

// natsReplicated says whether the stream info si shows a leader and
// replicas-1 followers that are current, for a cluster of replicas
// servers; a single server's stream has no cluster to show.
func natsReplicated(si *jetstream.StreamInfo, replicas int) error {
	if replicas == 1 {
		return nil
	}
	if si.Cluster == nil || si.Cluster.Leader == "" {
		return errors.New("the stream has no leader yet")
	}
	current := 0
	for _, r := range si.Cluster.Replicas {
		if r.Current && !r.Offline {
			current++
		}
	}
	if current < replicas-1 {
		return fmt.Errorf("the stream's leader %s has %d of %d followers current", si.Cluster.Leader, current, replicas-1)
	}
	return nil
}

// natsHTTPAddr is the monitoring address of the node called name among
// nodes: its host, NatsHTTPOffset above its client port.
func natsHTTPAddr(nodes []clusters.Node, name string) string {
	for _, n := range nodes {
		if n.Name != name {
			continue
		}
		host, p, err := net.SplitHostPort(n.Addr)
		port, perr := strconv.Atoi(p)
		if err != nil || perr != nil {
			return ""
		}
		return net.JoinHostPort(host, strconv.Itoa(port+NatsHTTPOffset))
	}
	return ""
}

// NatsRole asks the server called name, at addr (its client port) and
// httpAddr (its monitoring port), what it is now: the leader of the lock
// bucket's stream, else the JetStream meta leader, else a follower. A
// stream or meta group with no leader (an election is under way), or a
// server that does not answer within two seconds, is an error.
func NatsRole(ctx context.Context, addr, name, httpAddr string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, natsTimeout)
	defer cancel()
	js, done, err := natsJetStream(addr)
	if err != nil {
		return "", fmt.Errorf("nats %s: %w", addr, err)
	}
	defer done()
	s, err := js.Stream(ctx, natsbucket.Stream)
	if err != nil {
		return "", fmt.Errorf("nats %s: stream %s: %w", addr, natsbucket.Stream, err)
	}
	si := s.CachedInfo()
	switch {
	case si.Cluster == nil || si.Cluster.Leader == "":
		return "", fmt.Errorf("nats %s: stream %s has no leader", addr, natsbucket.Stream)
	case si.Cluster.Leader == name:
		return NatsLeader, nil
	}
	meta, err := natsMetaLeader(ctx, httpAddr)
	switch {
	case err != nil:
		return "", fmt.Errorf("nats %s: %w", addr, err)
	case meta == name:
		return NatsMetaLeader, nil
	}
	return NatsFollower, nil
}

// natsMetaLeader reads the name of the JetStream meta leader from the
// monitoring endpoint /jsz at httpAddr.
func natsMetaLeader(ctx context.Context, httpAddr string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+httpAddr+"/jsz", nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("monitoring: %w", err)
	}
	defer resp.Body.Close()
	var jsz struct {
		Meta *struct {
			Leader string `json:"leader"`
		} `json:"meta_cluster"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&jsz); err != nil {
		return "", fmt.Errorf("monitoring /jsz: %w", err)
	}
	if jsz.Meta == nil || jsz.Meta.Leader == "" {
		return "", errors.New("the JetStream meta group has no leader")
	}
	return jsz.Meta.Leader, nil
}

// askNats connects to the server at addr and reads the version it
// announced.
func askNats(_ context.Context, addr string, _ map[string]string) (string, string, error) {
	nc, err := natsConnect(addr)
	if err != nil {
		return "", "", fmt.Errorf("nats client: %w", err)
	}
	defer nc.Close()
	v := nc.ConnectedServerVersion()
	if v == "" {
		return "", "", errors.New("the server announced no version")
	}
	return ProductNats, v, nil
}

// resetNats is the nats backend's Reset: it purges the lock bucket's
// stream (every key, its revisions and its TTL markers), which the
// cluster made as it formed and keeps, and deletes every other stream,
// and returns once every server's replicas show it (natsResidue). The
// bucket's sequence goes on from where it was, as etcd's revision does:
// tokens drawn from it only have to grow.
func resetNats(ctx context.Context, l Layout, nodes []clusters.Node) error {
	var errs []error
	done := false
	for _, n := range nodes {
		err := func() error {
			js, closeJS, err := natsJetStream(n.Addr)
			if err != nil {
				return err
			}
			defer closeJS()
			qctx, cancel := context.WithTimeout(ctx, resetTimeout)
			defer cancel()
			names := js.StreamNames(qctx)
			var streams []string
			for name := range names.Name() {
				streams = append(streams, name)
			}
			if err := names.Err(); err != nil {
				return fmt.Errorf("list streams: %w", err)
			}
			for _, name := range streams {
				if name != natsbucket.Stream {
					if err := js.DeleteStream(qctx, name); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
						return fmt.Errorf("delete stream %s: %w", name, err)
					}
					continue
				}
				st, err := js.Stream(qctx, name)
				if err != nil {
					return fmt.Errorf("stream %s: %w", name, err)
				}
				if err := st.Purge(qctx); err != nil {
					return fmt.Errorf("purge stream %s: %w", name, err)
				}
			}
			return nil
		}()
		if err == nil {
			done = true
			break
		}
		errs = append(errs, fmt.Errorf("%s: %w", n.Name, err))
	}
	if !done {
		return fmt.Errorf("%s: reset: %w", l.Backend, errors.Join(errs...))
	}
	return Poll(ctx, func() error {
		res, err := natsResidue(ctx, l, nodes)
		if err == nil && len(res) > 0 {
			err = fmt.Errorf("%s: reset: left %s", l.Backend, strings.Join(res, "; "))
		}
		return err
	})
}

// natsResidue is the nats backend's Residue: what each server's own
// replicas hold, as its monitoring endpoint (/jsz?streams=true) reports
// them: any stream but the lock bucket's, and any message in the
// bucket's; and a bucket's stream missing from a server, which a fresh
// cluster has on every one.
func natsResidue(ctx context.Context, l Layout, nodes []clusters.Node) ([]string, error) {
	var out []string
	for _, n := range nodes {
		prefix := fmt.Sprintf("%s %s: ", l.Backend, n.Name)
		streams, err := natsStreams(ctx, natsHTTPAddr(nodes, n.Name))
		if err != nil {
			return out, fmt.Errorf("%s: residue of %s: %w", l.Backend, n.Name, err)
		}
		bucket := false
		for _, s := range streams {
			switch {
			case s.Name != natsbucket.Stream:
				out = append(out, fmt.Sprintf("%sstream %s (%d messages)", prefix, s.Name, s.State.Msgs))
			case s.State.Msgs > 0:
				bucket = true
				out = append(out, fmt.Sprintf("%sstream %s: %d messages", prefix, s.Name, s.State.Msgs))
			default:
				bucket = true
			}
		}
		if !bucket {
			out = append(out, prefix+"no stream "+natsbucket.Stream+" (a fresh cluster has the lock bucket)")
		}
	}
	return out, nil
}

// natsStream is one stream replica as a server's /jsz reports it.
type natsStream struct {
	Name  string `json:"name"`
	State struct {
		Msgs uint64 `json:"messages"`
	} `json:"state"`
}

// natsStreams reads the stream replicas the server whose monitoring port
// is httpAddr holds, of every account.
func natsStreams(ctx context.Context, httpAddr string) ([]natsStream, error) {
	qctx, cancel := context.WithTimeout(ctx, resetTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(qctx, http.MethodGet, "http://"+httpAddr+"/jsz?streams=true", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("monitoring: %w", err)
	}
	defer resp.Body.Close()
	var jsz struct {
		Accounts []struct {
			Streams []natsStream `json:"stream_detail"`
		} `json:"account_details"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&jsz); err != nil {
		return nil, fmt.Errorf("monitoring /jsz: %w", err)
	}
	var out []natsStream
	for _, a := range jsz.Accounts {
		out = append(out, a.Streams...)
	}
	return out, nil
}
