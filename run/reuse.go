package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/backend"
	"github.com/locktest/locktest/clusters/provider"
	"github.com/locktest/locktest/impls"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/runstore"
)

// Clusters keeps the started clusters of a series of runs (the matrix),
// so that a run takes a cluster an earlier run left healthy, reset,
// instead of starting its own: Config.Clusters shares one among the
// runs, and the series calls Close at its end (also when it is
// interrupted), which stops every cluster it keeps and removes the
// network labs they are in. It is safe for concurrent runs; a kept
// cluster serves one run at a time.
//
// What is kept: a cluster whose provider keeps clusters
// (provider.Def.KeepsClusters: the local provider) and whose run set up
// nothing else for it (no clock shim, no sync records, no delaying
// proxy) but, at most, a network lab its provider can record and prove
// (labKeeper: the local provider's namespaces, veths and bridge), of a
// backend that states its Reset and Residue (backend.Reusable). A run
// takes a kept cluster only when everything that shapes it is the same
// (clusterKey: provider and its settings, backend, nodes, persistence,
// cluster params, network, node program and environment; for a cluster
// in a network lab, labKey: the same, and the lab's shape, its client
// hosts included); the impl may differ. A cluster in a network lab is
// kept with its lab, and a run takes the two together before it makes a
// lab of its own (provider): its workers then go into the kept lab's
// client namespaces.
//
// How it is proven clean: before the run, a kept cluster's network lab
// must be as it was made (labKeeper.LabAsMade, read from the kernel:
// every veth and the bridge there, no iptables rule a fault left, no
// process in a client's namespace); the cluster is reset
// (backend.Reset), then its Residue, read from every node, must list
// nothing, and every node must run, serve (its kind's readiness query)
// and have the role it had when the cluster started. A cluster that
// fails any of these is stopped, and its lab removed; the run logs why
// and starts its own.
//
// When it is given back: at the run's end, when the run was not
// interrupted, every fault healed, no fault of the run changes what a
// heal does not restore (faultKeeps), no host was lost, and every node
// runs, serves and has its starting role; its network lab goes back with
// it. Otherwise the run stops it, and removes its lab, as a run without
// a keeper does.
//
// The logs: the nodes' files and data stay in the folder of the run
// that started the cluster. Each run's logs/ holds what each node logged
// while the run had the cluster, from where the node's log stood when
// the run took it (a first line says so when that is not its
// beginning); its results.json names the folder of the first run
// (runstore.ClusterInfo.StartedBy).
type Clusters struct {
	mu     sync.Mutex
	idle   []*keptCluster
	held   map[clusters.Cluster]*heldCluster
	closed bool
	// started counts the clusters its runs started, reused the runs that
	// took a kept one.
	started, reused int

	// MaxIdle, when above 0, stops a kept cluster (and removes its lab)
	// that no run took within MaxIdle of its last run's end: an idle
	// cluster's servers still use the CPU (an embedded etcd trio about a
	// twelfth of a core, for its heartbeats), which a matrix's runs, going
	// impl by impl and seed by seed, would leave to minutes of idling.
	// The keeper looks for such clusters whenever a run gives one back;
	// set it before the first run.
	MaxIdle time.Duration
	// now is the keeper's clock (nil: time.Now); tests set their own.
	now func() time.Time
	// stopping counts the stale clusters being stopped; Close waits for
	// them, and reports what they could not stop in stopErrs.
	stopping sync.WaitGroup
	stopErrs []error
	stopped  int
}

// NewClusters returns a keeper that keeps no cluster yet.
func NewClusters() *Clusters {
	return &Clusters{held: map[clusters.Cluster]*heldCluster{}}
}

// keptCluster is a cluster the keeper may hand to a run.
type keptCluster struct {
	key       string
	cl        clusters.Cluster
	layout    backend.Layout
	roles     map[string]string // each node's role as the cluster started
	runs      int               // the runs that had it
	startedBy string            // the folder of the run that started it
	log       *swapHandler      // the cluster's log (and its lab's): the run's that has it
	// lab is the provider whose network lab the cluster's nodes are in,
	// kept with it, or nil for a cluster on loopback.
	lab labKeeper
	// idleSince is when its last run gave it back.
	idleSince time.Time
}

// heldCluster is a run's cluster while the run has it: k is nil for a
// cluster that cannot be kept (info.NotKept says why).
type heldCluster struct {
	k       *keptCluster
	logFrom map[string]int64 // each node's log's size when the run took it
	info    runstore.ClusterInfo
	lab     *labHold // the run's hold of the cluster's network lab, or nil
}

// Stats returns how many clusters the keeper's runs started, and how
// many runs took a kept cluster instead.
func (k *Clusters) Stats() (started, reused int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.started, k.reused
}

// Close stops every cluster the keeper keeps, then removes the network
// lab it is in, each within closeTimeout of ctx, and keeps no more: a run
// that has one still stops it (and removes its lab) at its end. An error
// names each cluster it could not stop and each lab it could not remove.
func (k *Clusters) Close(ctx context.Context) error {
	if k == nil {
		return nil
	}
	k.mu.Lock()
	idle := k.idle
	k.idle, k.closed = nil, true
	k.mu.Unlock()
	var errs []error
	for _, c := range idle {
		errs = append(errs, c.remove(ctx))
	}
	k.stopping.Wait()
	k.mu.Lock()
	errs = append(errs, k.stopErrs...)
	k.stopErrs = nil
	k.mu.Unlock()
	return errors.Join(errs...)
}

// Idled returns how many kept clusters the keeper stopped because no run
// took them within MaxIdle.
func (k *Clusters) Idled() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.stopped
}

// clock is the keeper's time now.
func (k *Clusters) clock() time.Time {
	if k.now != nil {
		return k.now()
	}
	return time.Now()
}

// stopStale stops, each in a goroutine of its own, the kept clusters no
// run took within MaxIdle, and keeps them no more. k.mu must be held.
func (k *Clusters) stopStale() {
	if k.MaxIdle <= 0 || k.closed {
		return
	}
	t := k.clock()
	k.idle = slices.DeleteFunc(k.idle, func(c *keptCluster) bool {
		if t.Sub(c.idleSince) <= k.MaxIdle {
			return false
		}
		k.stopped++
		k.stopping.Go(func() {
			if err := c.remove(context.Background()); err != nil {
				k.mu.Lock()
				k.stopErrs = append(k.stopErrs, err)
				k.mu.Unlock()
			}
		})
		return true
	})
}

// remove stops a kept cluster, then removes the network lab it is in,
// each within closeTimeout of ctx; the error names what it could not
// stop or remove.
func (c *keptCluster) remove(ctx context.Context) error {
	var errs []error
	sctx, cancel := context.WithTimeout(ctx, closeTimeout)
	err := c.cl.Stop(sctx)
	cancel()
	if err != nil {
		errs = append(errs, fmt.Errorf("stop kept %s cluster of %s: %w", c.layout.Backend, c.startedBy, err))
	}
	if c.lab != nil {
		sctx, cancel := context.WithTimeout(ctx, closeTimeout)
		err := c.lab.CloseLab(sctx)
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("remove the network lab of the kept %s cluster of %s: %w", c.layout.Backend, c.startedBy, err))
		}
	}
	return errors.Join(errs...)
}

// clusterKey returns what shapes the cluster of a run of cfg (impl on
// the set-up prov), which a kept cluster must match exactly, or why the
// run's cluster cannot be kept.
func clusterKey(cfg Config, impl impls.Impl, prov *providerSetup) (key, why string) {
	def, err := cfg.providerOf()
	if err != nil {
		return "", err.Error()
	}
	network, lab, _, _ := prov.describe()
	switch {
	case !def.KeepsClusters:
		return "", "the " + def.Name + " provider starts a cluster for every run"
	case !backend.Reusable(impl.Backend):
		return "", impl.Backend + " states no reset and residue check"
	case prov.clocks != nil || prov.syncs:
		return "", "the run's nodes run under its clock shim or record their syncs"
	case prov.proxy != nil:
		return "", "the run's clients reach the nodes through its delaying proxy"
	case lab != "" && (prov.lab == nil || !prov.lab.recorded):
		why := "the run's nodes are in its network lab"
		if prov.lab != nil && prov.lab.why != "" {
			why += ", which cannot be kept: " + prov.lab.why
		}
		return "", why
	case lab != "":
		return prov.lab.key, ""
	}
	b, err := json.Marshal(struct {
		Provider, Backend, Persistence, Network string
		Nodes                                   int
		Params                                  map[string]string
		ProviderSettings                        map[string]string
		NodeCommand, NodeEnv                    []string
	}{def.Name, impl.Backend, cfg.Persistence, network, impl.Nodes, cfg.ClusterParams, cfg.ProviderSettings, cfg.NodeCommand, cfg.NodeEnv})
	if err != nil {
		return "", err.Error()
	}
	return string(b), ""
}

// faultKeeps says why a run with the fault called name must stop its
// cluster rather than give it back, or "" when the fault's heal leaves
// the cluster as it found it (the data aside, which the next reset
// clears). It decides from the fault's registered facts: a fault that
// cuts a node's power (nemesis.NeedPowerCut) leaves durable state a
// fresh start lacks; one that moves nodes' clocks (NeedClocks) or slows
// their disks (NeedSyncDelay) changes what the nodes' shim keeps; one that
// hits every data node at once (Spec.Whole: kill-all) makes the cluster
// form again. Any other fault (a kill of one node and its restart, a
// pause, a partition, a client's fault) is healed exactly, which the
// health check at the run's end confirms.
func faultKeeps(name string) string {
	s, ok := nemesis.Lookup(name)
	switch {
	case !ok:
		return "fault " + name + " is not registered"
	case s.Whole:
		return "fault " + name + " hits every node at once: the cluster formed again"
	case slices.Contains(s.Needs, nemesis.NeedPowerCut):
		return "fault " + name + " cuts a node's power: its durable state is not a fresh start's"
	case slices.Contains(s.Needs, nemesis.NeedClocks):
		return "fault " + name + " moves the nodes' clocks"
	case slices.Contains(s.Needs, nemesis.NeedSyncDelay):
		return "fault " + name + " slows the nodes' disks"
	}
	return ""
}

// closeTimeout bounds the stop of one kept cluster by Close.
const closeTimeout = 30 * time.Second

// reuseTimeout bounds a kept cluster's reset and checks.
const reuseTimeout = time.Minute

// cluster is startCluster for a run of a series that keeps its
// clusters: it hands out the cluster the run took with its network lab
// (provider), or takes a kept cluster on loopback that matches the
// run's, reset and checked, or starts one as startCluster does (in the
// run's own lab, when it made one). What it hands out is held for the
// run until finish.
func (k *Clusters) cluster(ctx context.Context, cfg Config, impl impls.Impl, dir string, prov *providerSetup, lg *slog.Logger) (clusters.Cluster, error) {
	if h := prov.lab; h != nil && h.kept != nil {
		// The run took the cluster with its lab (Clusters.provider),
		// both proven clean.
		c := h.kept
		h.used = true
		if why := prov.p.ClockReason(); why != "" {
			prov.clockWhy = why
		}
		lg.Info("cluster reused with its network lab", "started_by", c.startedBy, "runs_before", c.runs)
		k.count(true)
		k.hold(c.cl, &heldCluster{k: c, logFrom: h.from, lab: h, info: runstore.ClusterInfo{
			Reused: true, RunsBefore: c.runs, StartedBy: c.startedBy, Reset: resetLabChecked}})
		return c.cl, nil
	}
	key, why := clusterKey(cfg, impl, prov)
	var layout backend.Layout
	if why == "" {
		var err error
		if layout, err = backend.NewLayout(impl.Backend, impl.Nodes, cfg.ClusterParams); err != nil {
			why = err.Error()
		}
	}
	if why != "" {
		cl, err := startCluster(ctx, cfg, impl, dir, prov, lg)
		k.count(false)
		if cl != nil {
			k.hold(cl, &heldCluster{info: runstore.ClusterInfo{Fresh: why, NotKept: why}})
		}
		return cl, err
	}
	fresh := ""
	log := newSwapHandler(lg.Handler())
	var lab labKeeper
	if lk, ok := prov.p.(labKeeper); ok && prov.lab != nil && prov.lab.recorded {
		// A lab of the run's own, just made: a kept cluster, in a lab
		// of its own, cannot serve it, and the nodes log where the lab
		// does, to the run that has both.
		fresh, log, lab = prov.lab.fresh, prov.lab.log, lk
	}
	for lab == nil {
		c := k.takeIdle(key)
		if c == nil {
			break
		}
		c.log.set(lg.Handler())
		from := logSizes(c.cl)
		if err := c.check(ctx, true); err != nil {
			lg.Warn("kept cluster not reused: stopped", "started_by", c.startedBy, "why", err)
			fresh = "a kept cluster failed its check, and was stopped: " + err.Error()
			if err := c.remove(context.WithoutCancel(ctx)); err != nil {
				lg.Warn("stop kept cluster", "err", err)
			}
			continue
		}
		if why := prov.p.ClockReason(); why != "" {
			prov.clockWhy = why
		}
		lg.Info("cluster reused", "started_by", c.startedBy, "runs_before", c.runs)
		k.count(true)
		k.hold(c.cl, &heldCluster{k: c, logFrom: from, info: runstore.ClusterInfo{
			Reused: true, RunsBefore: c.runs, StartedBy: c.startedBy, Reset: "checked: no residue"}})
		return c.cl, nil
	}
	cl, err := startCluster(ctx, cfg, impl, dir, prov, slog.New(log))
	k.count(false)
	if cl == nil {
		return cl, err
	}
	h := &heldCluster{info: runstore.ClusterInfo{Fresh: fresh}, lab: prov.lab}
	if err == nil {
		c := &keptCluster{key: key, cl: cl, layout: layout, startedBy: dir, log: log, lab: lab}
		if c.roles, err = readRoles(ctx, cl, layout); err != nil {
			h.info.NotKept = "its roles could not be read at its start: " + err.Error()
			err = nil
		} else {
			h.k, h.logFrom = c, map[string]int64{}
		}
	}
	k.hold(cl, h)
	return cl, err
}

// resetLabChecked is run.cluster.reset of a run that took a kept
// cluster with its network lab.
const resetLabChecked = "checked: no residue; network lab as made"

// labKeeper is a run's provider whose network lab a keeper may keep with
// the cluster in it: the local provider's, when it made a lab. RecordLab
// records the lab as made, once made and before any fault; LabAsMade
// proves, from what the kernel shows and sharing no code with the heal,
// that it is as recorded (every veth and the bridge there, no iptables
// rule a fault left, no process in a client's namespace); CloseLab
// removes it.
type labKeeper interface {
	RecordLab(ctx context.Context) error
	LabAsMade(ctx context.Context) error
	CloseLab(ctx context.Context) error
}

// labHold is what the keeper knows of a run whose provider may make a
// network lab it keeps (labKey): the run's providerSetup holds it from
// Clusters.provider on.
type labHold struct {
	key string
	// log is the lab's log and its cluster's: the run's that has them.
	log *swapHandler
	// recorded says the run's provider has a lab, recorded as made or
	// taken from the keeper; why says why a lab it made cannot be kept.
	recorded bool
	why      string
	// kept is the cluster, with its lab, the run took from the keeper,
	// and from each node's log's size then; fresh says why no kept one
	// served the run. used says the run's cluster step took kept.
	kept  *keptCluster
	from  map[string]int64
	fresh string
	used  bool
	// given says the run gave the lab back with its cluster (finish):
	// the run must not remove it.
	given bool
}

// labKey returns what shapes a run of cfg (impl) whose nodes and clients
// would be in a network lab: the cluster's shape (as clusterKey) and the
// lab's (the network mode and subnet asked for, the client hosts, whether
// network faults were asked for), which a kept cluster and its lab must
// match exactly; or why such a run's lab cannot be kept: it has none
// (--net loopback, or --net auto without a network fault), it is not the
// keeping provider's, the backend has no reset, or its faults need what
// a lab's proof does not cover (the clock shim, sync records, a delay).
// It reads cfg alone, so that a run looks for a kept lab before it makes
// one.
func labKey(cfg Config, impl impls.Impl) (key, why string) {
	def, err := cfg.providerOf()
	if err != nil {
		return "", err.Error()
	}
	faults := cfg.faultParts()
	network := nemesis.Needs(faults, nemesis.NeedNetwork)
	switch {
	case cfg.Net != NetNamespaces && (cfg.Net != NetAuto || !network):
		return "", "the run's nodes are in no network lab"
	case !def.KeepsClusters || !def.Namespaces:
		return "", "the " + def.Name + " provider keeps no network lab"
	case !backend.Reusable(impl.Backend):
		return "", impl.Backend + " states no reset and residue check"
	case nemesis.Needs(faults, nemesis.NeedClocks) || nemesis.Needs(faults, nemesis.NeedPowerCut) || nemesis.Needs(faults, nemesis.NeedSyncDelay):
		return "", "the run's nodes run under its clock shim or record their syncs"
	case nemesis.Needs(faults, nemesis.NeedDelay):
		return "", "the run delays the nodes' packets (tc netem or a proxy)"
	}
	type labShape struct {
		Net, Subnet   string
		Clients       int
		NetworkFaults bool
	}
	b, err := json.Marshal(struct {
		Provider, Backend, Persistence string
		Nodes                          int
		Params                         map[string]string
		ProviderSettings               map[string]string
		NodeCommand, NodeEnv           []string
		Lab                            labShape
	}{def.Name, impl.Backend, cfg.Persistence, impl.Nodes, cfg.ClusterParams, cfg.ProviderSettings, cfg.NodeCommand, cfg.NodeEnv,
		labShape{cfg.Net, cfg.Subnet, cfg.Clients, network}})
	if err != nil {
		return "", err.Error()
	}
	return string(b), ""
}

// provider makes the run's provider (makeProvider), or, with a keeper
// and a run whose lab may be kept (labKey), takes a kept cluster with its
// network lab instead, once the lab is proven as made (LabAsMade) and the
// cluster reset and checked (as cluster does): a kept pair that fails is
// removed, and the next one tried, then a provider made. What it took or
// made is in p.lab, for clusterKey, cluster, finish and p's close.
func (k *Clusters) provider(ctx context.Context, cfg Config, impl impls.Impl, p *providerSetup, lg *slog.Logger) (provider.Provider, error) {
	if k == nil {
		return makeProvider(ctx, cfg, impl, lg)
	}
	key, why := labKey(cfg, impl)
	if why != "" {
		return makeProvider(ctx, cfg, impl, lg)
	}
	h := &labHold{key: key}
	p.lab = h
	for {
		c := k.takeIdle(key)
		if c == nil {
			break
		}
		c.log.set(lg.Handler())
		from := logSizes(c.cl)
		pr, ok := c.lab.(provider.Provider)
		err := errors.New("it has no network lab of a provider")
		if ok {
			if err = c.lab.LabAsMade(ctx); err == nil {
				err = c.check(ctx, true)
			}
		}
		if err != nil {
			lg.Warn("kept cluster and its network lab not reused: removed", "started_by", c.startedBy, "why", err)
			h.fresh = "a kept cluster failed its check, and was removed with its network lab: " + err.Error()
			if err := c.remove(context.WithoutCancel(ctx)); err != nil {
				lg.Warn("remove kept cluster", "err", err)
			}
			continue
		}
		h.kept, h.from, h.log, h.recorded = c, from, c.log, true
		return pr, nil
	}
	h.log = newSwapHandler(lg.Handler())
	pr, err := makeProvider(ctx, cfg, impl, slog.New(h.log))
	if err != nil || pr == nil {
		return pr, err
	}
	lk, ok := pr.(labKeeper)
	if _, lab, _ := pr.Describe(); lab == "" || !ok {
		return pr, nil
	}
	if err := lk.RecordLab(ctx); err != nil {
		// The lab stays the run's, which removes it at its end.
		h.why = "it could not be recorded as made: " + err.Error()
		lg.Warn("the network lab will not be kept", "why", err)
		return pr, nil
	}
	h.recorded = true
	return pr, nil
}

// handedBack says whether the run gave its network lab back to the
// keeper, which then removes it, not the run. A cluster the run took with
// its lab but never came to use is stopped here, before the run removes
// the lab. It is nil-safe: a run without a keeper's lab removes its own.
func (h *labHold) handedBack(ctx context.Context, lg *slog.Logger) bool {
	if h == nil {
		return false
	}
	if h.kept != nil && !h.used {
		if err := h.kept.cl.Stop(ctx); err != nil {
			lg.Error("stop the kept cluster the run took", "err", err)
		}
	}
	return h.given
}

// count counts a cluster started, or a kept one reused.
func (k *Clusters) count(reused bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if reused {
		k.reused++
	} else {
		k.started++
	}
}

// takeIdle removes from the kept clusters the first whose key is key,
// and returns it; nil when none matches.
func (k *Clusters) takeIdle(key string) *keptCluster {
	k.mu.Lock()
	defer k.mu.Unlock()
	for i, c := range k.idle {
		if c.key == key {
			k.idle = slices.Delete(k.idle, i, i+1)
			return c
		}
	}
	return nil
}

// hold records that cl serves a run, as h says.
func (k *Clusters) hold(cl clusters.Cluster, h *heldCluster) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.held[cl] = h
}

// check makes sure the cluster is fit for a run: reset first, when
// reset is set, then no residue, and every node running, serving and in
// the role it started in. Its error says what is wrong.
func (c *keptCluster) check(ctx context.Context, reset bool) error {
	ctx, cancel := context.WithTimeout(ctx, reuseTimeout)
	defer cancel()
	nodes := c.cl.Nodes()
	if reset {
		if err := backend.Reset(ctx, c.layout, nodes); err != nil {
			return err
		}
		res, err := backend.Residue(ctx, c.layout, nodes)
		if err != nil {
			return err
		}
		if len(res) > 0 {
			return fmt.Errorf("residue after the reset: %s", residueText(res))
		}
	}
	return healthy(ctx, c.cl, c.layout, c.roles)
}

// residueText is the first few items of a residue, for one line.
func residueText(res []string) string {
	if len(res) > 5 {
		return fmt.Sprintf("%q and %d more", res[:5], len(res)-5)
	}
	return fmt.Sprintf("%q", res)
}

// healthy says whether every node of cl runs, serves by its kind's
// readiness query and has the role roles gives it, or what is wrong.
func healthy(ctx context.Context, cl clusters.Cluster, l backend.Layout, roles map[string]string) error {
	var pids map[string]int
	if p, ok := cl.(interface{ Pids() map[string]int }); ok {
		pids = p.Pids()
	}
	now, err := readRoles(ctx, cl, l)
	if err != nil {
		return err
	}
	for _, n := range cl.Nodes() {
		if pids != nil && pids[n.Name] == 0 {
			return fmt.Errorf("node %s is not running", n.Name)
		}
		if err := backend.Ready(ctx, l.Kind(n.Name), n.Addr); err != nil {
			return fmt.Errorf("node %s does not serve: %w", n.Name, err)
		}
		if now[n.Name] != roles[n.Name] {
			return fmt.Errorf("node %s is %s, and was %s at the cluster's start", n.Name, orNone(now[n.Name]), orNone(roles[n.Name]))
		}
	}
	return nil
}

func orNone(role string) string {
	if role == "" {
		return "of no role"
	}
	return role
}

// readRoles reads the role of each node of cl now, for a backend whose
// nodes have roles; nil for one whose nodes are alike.
func readRoles(ctx context.Context, cl clusters.Cluster, l backend.Layout) (map[string]string, error) {
	rr, ok := cl.(clusters.RoleReader)
	if !ok || !l.HasRoles() {
		return nil, nil
	}
	out := map[string]string{}
	for _, n := range cl.Nodes() {
		r, err := rr.Role(ctx, n)
		if err != nil {
			return nil, fmt.Errorf("role of %s: %w", n.Name, err)
		}
		out[n.Name] = r
	}
	return out, nil
}

// judge decides, once the run's workers stopped, whether the run gives
// its cluster cl back: the run's faults (faults), the error of their
// heals (healErr), whether it was interrupted and why a host was lost
// ("" for none) say whether it may, and the cluster's health whether it
// can. It returns the run's ClusterInfo, nil for a run without a keeper.
func (k *Clusters) judge(ctx context.Context, cl clusters.Cluster, faults []string, healErr error, interrupted bool, lost string, lg *slog.Logger) *runstore.ClusterInfo {
	if k == nil || cl == nil {
		return nil
	}
	k.mu.Lock()
	h := k.held[cl]
	k.mu.Unlock()
	if h == nil {
		return nil
	}
	why := h.info.NotKept
	for _, f := range faults {
		if why == "" {
			why = faultKeeps(f)
		}
	}
	switch {
	case why != "":
	case h.k == nil:
		why = "the cluster cannot be kept"
	case interrupted:
		why = "the run was interrupted"
	case healErr != nil:
		why = "a fault was not healed: " + healErr.Error()
	case lost != "":
		why = lost
	default:
		if err := h.k.check(ctx, false); err != nil {
			why = "left unhealthy: " + err.Error()
		}
	}
	h.info.Kept, h.info.NotKept = why == "", why
	if why != "" {
		lg.Info("cluster not kept: the run stops it", "why", why)
	}
	info := h.info
	return &info
}

// finish ends the run's hold of cl: a cluster the run judged fit is
// given back (unless the keeper was closed meanwhile), one it did not
// judge fit, or never judged (a run that failed or was interrupted), is
// stopped. Either way the run's logDir receives what each node logged
// while the run had it. It returns cl when the run must stop it itself,
// as a run without a keeper does (stopAll), nil when finish took care
// of it.
func (k *Clusters) finish(ctx context.Context, cl clusters.Cluster, logDir string, lg *slog.Logger) clusters.Cluster {
	if k == nil || cl == nil {
		return cl
	}
	k.mu.Lock()
	h := k.held[cl]
	delete(k.held, cl)
	keep := h != nil && h.k != nil && h.info.Kept && !k.closed
	k.mu.Unlock()
	if h == nil || h.k == nil {
		return cl
	}
	if rc, ok := cl.(clusters.Reconnector); ok {
		if err := rc.Reconnect(ctx); err != nil {
			lg.Warn("reconnect to the hosts lost during the run", "err", err)
		}
	}
	if !keep {
		if err := cl.Stop(ctx); err != nil {
			lg.Error("stop cluster", "err", err)
		}
	}
	if err := copyLogsFrom(cl, h.logFrom, h.k.startedBy, logDir); err != nil {
		lg.Warn("collect node logs", "err", err)
	}
	if !keep {
		return nil
	}
	h.k.runs++
	h.k.log.set(slog.DiscardHandler)
	k.mu.Lock()
	closed := k.closed
	if !closed {
		if h.lab != nil && h.k.lab != nil {
			// The lab goes back with its cluster: the run's provider
			// must not remove it (labHold.handedBack).
			h.lab.given = true
		}
		h.k.idleSince = k.clock()
		k.idle = append(k.idle, h.k)
		k.stopStale()
	}
	k.mu.Unlock()
	if closed { // closed while the logs were copied
		if err := cl.Stop(ctx); err != nil {
			lg.Error("stop cluster", "err", err)
		}
	}
	return nil
}

// logSizes returns the size of each node's log file now, by name.
func logSizes(cl clusters.Cluster) map[string]int64 {
	out := map[string]int64{}
	for _, n := range cl.Nodes() {
		if fi, err := os.Stat(n.LogPath); err == nil {
			out[n.Name] = fi.Size()
		}
	}
	return out
}

// copyLogsFrom writes each node's log, from the offset from gives it on,
// to dir/<name>.log: what the node logged while one run had it. A log
// copied from past its beginning starts with a line that says where the
// rest is (the folder of the run that started the cluster, startedBy).
func copyLogsFrom(cl clusters.Cluster, from map[string]int64, startedBy, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var errs []error
	for _, n := range cl.Nodes() {
		if n.LogPath == "" {
			continue
		}
		if err := copyLogFrom(n.LogPath, from[n.Name], startedBy, filepath.Join(dir, n.Name+".log")); err != nil {
			errs = append(errs, fmt.Errorf("collect log of %s: %w", n.Name, err))
		}
	}
	return errors.Join(errs...)
}

func copyLogFrom(src string, off int64, startedBy, dst string) error {
	in, err := os.Open(src)
	if errors.Is(err, os.ErrNotExist) {
		return nil // a node that never started has no log
	}
	if err != nil {
		return err
	}
	defer in.Close()
	if _, err := in.Seek(off, io.SeekStart); err != nil {
		return err
	}
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if off > 0 {
		fmt.Fprintf(out, "# locktest: this node's log from byte %d on, while this run had the cluster; before it: %s\n",
			off, filepath.Join(startedBy, runstore.LogsDir))
	}
	_, err = io.Copy(out, in)
	return errors.Join(err, out.Close())
}

// swapHandler is the log of a kept cluster: it sends each record to the
// handler of the run that has the cluster now, with the attributes and
// groups its derived handlers were made with.
type swapHandler struct {
	cur *atomic.Pointer[slog.Handler]
	ops []func(slog.Handler) slog.Handler
}

func newSwapHandler(h slog.Handler) *swapHandler {
	s := &swapHandler{cur: &atomic.Pointer[slog.Handler]{}}
	s.set(h)
	return s
}

// set sends the records from now on to h.
func (s *swapHandler) set(h slog.Handler) { s.cur.Store(&h) }

func (s *swapHandler) target() slog.Handler {
	h := *s.cur.Load()
	for _, op := range s.ops {
		h = op(h)
	}
	return h
}

func (s *swapHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return s.target().Enabled(ctx, l)
}

func (s *swapHandler) Handle(ctx context.Context, r slog.Record) error {
	return s.target().Handle(ctx, r)
}

func (s *swapHandler) WithAttrs(as []slog.Attr) slog.Handler {
	as = slices.Clone(as)
	return &swapHandler{cur: s.cur, ops: append(slices.Clip(s.ops), func(h slog.Handler) slog.Handler { return h.WithAttrs(as) })}
}

func (s *swapHandler) WithGroup(name string) slog.Handler {
	return &swapHandler{cur: s.cur, ops: append(slices.Clip(s.ops), func(h slog.Handler) slog.Handler { return h.WithGroup(name) })}
}

// keptKeys returns the keys of the kept clusters, for tests.
func (k *Clusters) keptKeys() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []string
	for _, c := range k.idle {
		out = append(out, c.key)
	}
	return out
}

// startCluster starts the run's cluster (the package's startCluster), or,
// with a keeper, takes it from the keeper (cluster).
func (k *Clusters) startCluster(ctx context.Context, cfg Config, impl impls.Impl, dir string, prov *providerSetup, lg *slog.Logger) (clusters.Cluster, error) {
	if k == nil {
		return startCluster(ctx, cfg, impl, dir, prov, lg)
	}
	return k.cluster(ctx, cfg, impl, dir, prov, lg)
}
