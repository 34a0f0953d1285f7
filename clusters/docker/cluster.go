// Package docker is the cluster provider that runs the nodes of a lock
// service as Docker containers, beside the local
// provider's processes. A run gets a user-defined bridge network of its own
// (a [Network]); each node is a container on it with a fixed address, created,
// started and waited for with testcontainers-go. The faults go below
// testcontainers, through the Docker API (github.com/moby/moby/client) and
// the container's host pid: SIGSTOP and SIGCONT for pauses, SIGKILL and a
// start of the same container for kills, iptables rules inside the
// container's network namespace for partitions and loss, and the clock shim
// bind-mounted into the container for clock faults. The lock clients stay on
// the host and dial the containers' addresses.
//
// The connection to the engine is clusters/engine's: everything a run
// creates carries the run's labels ([engine.OwnerLabels]) and is removed at
// the run's end ([Network.Close]); [engine.Engine.Cleanup] removes what a
// driver that was killed outright left.
//
// Images are the official ones by name and tag unless the run names others
// or locktest built its own with [images.Build] (`locktest images
// build`), from the host's installed packages without pulling anything.
package docker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/backend"
	"github.com/locktest/locktest/clusters/engine"
	"github.com/locktest/locktest/clusters/images"
	"github.com/locktest/locktest/internal/procfs"
)

// Where the clock shim and a node's offset file appear inside a container.
const (
	shimPath      = "/locktest/clockshim.so"
	shimClockPath = "/locktest/clock"
	// envClockFile is clockshim.EnvFile; repeated so this package does not
	// import the local provider's.
	envClockFile = "LOCKTEST_CLOCK_FILE"
)

// logTailLines is how many lines of a container's output a start-up error
// quotes.
const logTailLines = 8

// Options configures a docker cluster of any backend.
type Options struct {
	// Backend is the backend whose nodes run, any of Backends.
	Backend string
	// Nodes is the number of server nodes; 0 means the backend's default.
	Nodes int
	// Dir is the run directory; node n's collected output goes to
	// Dir/nodes/<n>/container.log.
	Dir string
	// Lab is the run's network; the cluster registers its nodes there.
	Lab *Network
	// Image is the image every node runs (see images.Resolve).
	Image images.Image
	// Persistence is the durability of backends that have a setting for it
	// (Redis: off, everysec, always; "" is off).
	Persistence string
	// Params holds backend-specific settings, documented by each backend.
	Params map[string]string
	// Shim, if set, returns the host paths of the clock shim library and of
	// a node's offset file; both are bind-mounted into the node's container
	// and preloaded there.
	Shim func(node string) (lib, file string, err error)
	// SyncRecords makes each node of a backend whose syncs locktest can
	// record (backend.Layout.SyncRecordReason) record what it syncs: a C
	// server through the clock shim (Shim must be set), a server of the
	// node program under the program's sync tracer. The node's data
	// directory and its record are then bind mounts of its folder under
	// Dir, and the cluster can cut a node's power (clusters.PowerCutter).
	SyncRecords bool
	// Logger receives node starts, kills, pauses and resumes; nil discards.
	Logger *slog.Logger
}

// Containers is the nodes of one backend as containers on a Lab's network,
// each with a fixed address, started and waited for with testcontainers-go.
// It is a backend.Containers over this provider's driver: a
// clusters.Containers, Killer, GroupRestarter, Pauser, LogCollector,
// RoleReader and Targeter; with Options.SyncRecords it is a PowerCutter
// too. Its methods are safe for concurrent use; each that starts, stops
// or changes a node holds the cluster's lock for its whole duration.
type Containers struct {
	// Cluster is the nodes as every provider runs them (their lock,
	// formation, roles and targets), over this provider's driver.
	*backend.Deployment[*node]

	layout backend.Layout
	lab    *Network
	image  images.Image
	opts   Options
	log    *slog.Logger
	nodes  []*node
}

var (
	_ clusters.Cluster        = (*Containers)(nil)
	_ clusters.Killer         = (*Containers)(nil)
	_ clusters.GroupRestarter = (*Containers)(nil)
	_ clusters.Pauser         = (*Containers)(nil)
	_ clusters.LogCollector   = (*Containers)(nil)
	_ clusters.RoleReader     = (*Containers)(nil)
	_ clusters.Targeter       = (*Containers)(nil)
)

// node is one container of a cluster.
type node struct {
	name    string
	kind    string // backend.NodeSpec.Kind
	ip      netip.Addr
	port    int
	dir     string
	logPath string
	cli     *client.Client

	mu sync.Mutex // guards c
	c  *testcontainers.DockerContainer
	// frozen is set while the node is paused through the Docker API (when
	// its process is not one of this host's).
	frozen bool
}

func (n *node) addr() string { return net.JoinHostPort(n.ip.String(), strconv.Itoa(n.port)) }

// id returns the container's id, or "" before it was created.
func (n *node) id() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.c == nil {
		return ""
	}
	return n.c.GetContainerID()
}

// hostPid returns the host pid of the container's main process, or an
// error wrapping errNotRunning.
func (n *node) hostPid(ctx context.Context) (int, error) {
	id := n.id()
	if id == "" {
		return 0, fmt.Errorf("node %s: %w (not created)", n.name, errNotRunning)
	}
	res, err := n.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return 0, fmt.Errorf("node %s: inspect: %s", n.name, engine.FirstLine(err))
	}
	st := res.Container.State
	if st == nil || !st.Running || st.Pid == 0 {
		return 0, fmt.Errorf("node %s: %w", n.name, errNotRunning)
	}
	return st.Pid, nil
}

// localPid returns the container's host pid when it is a process of this
// host that belongs to the container (its cgroup names the container), so
// that a signal or nsenter reaches the container and nothing else — not a
// process that happens to have the pid a remote daemon reported.
func (n *node) localPid(ctx context.Context) (int, error) {
	pid, err := n.hostPid(ctx)
	if err != nil {
		return 0, err
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if id := n.id(); err != nil || id == "" || !bytes.Contains(b, []byte(id)) {
		return 0, fmt.Errorf("node %s: host pid %d is not the container's process on this host (is the Docker daemon elsewhere?)", n.name, pid)
	}
	return pid, nil
}

// New checks opts and returns a cluster that has not started yet: the
// backend's layout (backend.NewLayout), each node with an address of its
// own on the lab's network.
func New(opts Options) (*Containers, error) {
	if opts.Lab == nil {
		return nil, errors.New("docker provider: Options.Lab (the run's network) is required")
	}
	if _, err := backend.CheckPersistence(opts.Persistence); err != nil {
		return nil, fmt.Errorf("docker %s: %w", opts.Backend, err)
	}
	layout, err := backend.NewLayout(opts.Backend, opts.Nodes, opts.Params, ownParams[opts.Backend]...)
	if err != nil {
		return nil, fmt.Errorf("docker %w", err)
	}
	if opts.Image.Ref == "" {
		return nil, fmt.Errorf("docker provider: no image for %s", opts.Backend)
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("docker %s: %w", opts.Backend, err)
	}
	lg := opts.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	c := &Containers{layout: layout, lab: opts.Lab, image: opts.Image, opts: opts, log: lg}
	for _, spec := range layout.Nodes {
		k := kinds[spec.Kind]
		ip, err := opts.Lab.allocIP()
		if err != nil {
			return nil, err
		}
		nd := filepath.Join(dir, "nodes", spec.Name)
		n := &node{name: spec.Name, kind: spec.Kind, ip: ip, port: k.port, dir: nd, logPath: filepath.Join(nd, "container.log"), cli: opts.Lab.e.Client()}
		c.nodes = append(c.nodes, n)
		opts.Lab.register(n)
	}
	c.Deployment = backend.NewDeployment("docker", layout, c.nodes, driver{c})
	return c, nil
}

// Image returns the image the nodes run.
func (c *Containers) Image() images.Image { return c.image }

// engineStartTime is what a group start adds to its kinds' readiness
// bound for the engine's own part of a start: each container's network
// endpoint, mounts and cgroup, which the engine sets up one container
// after another. With both cores busy, five Redis containers' starts took
// the whole of Redis's 30 s before any server could answer.
const engineStartTime = time.Minute

// readyTimeout is the longest start bound of the kinds of ns, plus the
// engine's part (engineStartTime).
func readyTimeout(ns []*node) time.Duration {
	var d time.Duration
	for _, n := range ns {
		d = max(d, kinds[n.kind].readyTimeout)
	}
	return d + engineStartTime
}

// startGroup creates the containers of ns that do not exist yet, starts
// those not running, all at once, and returns once each is ready. The
// cluster's lock must be held.
func (c *Containers) startGroup(ctx context.Context, ns []*node) error {
	var todo []*node
	for _, n := range ns {
		if _, err := n.hostPid(ctx); err == nil {
			continue
		}
		todo = append(todo, n)
	}
	for _, n := range todo {
		if n.id() != "" {
			continue
		}
		if err := c.create(ctx, n); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, readyTimeout(todo))
	defer cancel()
	errs := make([]error, len(todo))
	var wg sync.WaitGroup
	for i, n := range todo {
		wg.Go(func() { errs[i] = c.startNode(ctx, n) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// create creates n's container without starting it.
func (c *Containers) create(ctx context.Context, n *node) error {
	if err := os.MkdirAll(n.dir, 0o755); err != nil {
		return fmt.Errorf("docker %s: node %s: %w", c.opts.Backend, n.name, err)
	}
	spec, err := kinds[n.kind].container(c, n)
	if err != nil {
		return err
	}
	labels := c.lab.Labels()
	labels[engine.LabelNode] = n.name
	env := map[string]string{}
	for k, v := range spec.env {
		env[k] = v
	}
	binds, senv, err := c.syncMounts(n)
	if err != nil {
		return err
	}
	maps.Copy(env, senv)
	if c.opts.Shim != nil && backend.ClockShimReason(c.opts.Backend) == "" {
		lib, file, err := c.opts.Shim(n.name)
		if err != nil {
			return fmt.Errorf("docker %s: node %s: clock shim: %w", c.opts.Backend, n.name, err)
		}
		binds = append(binds, lib+":"+shimPath+":ro", file+":"+shimClockPath+":ro")
		env["LD_PRELOAD"] = shimPath
		env[envClockFile] = shimClockPath
	}
	netName := c.lab.name
	req := testcontainers.GenericContainerRequest{
		ContainerRequest: testcontainers.ContainerRequest{
			Image:      c.image.Ref,
			Name:       "locktest-" + c.lab.id + "-" + n.name,
			Entrypoint: spec.entrypoint,
			Cmd:        spec.cmd,
			Env:        env,
			Labels:     labels,
			Files:      spec.files,
			Networks:   []string{netName},
			HostConfigModifier: func(hc *container.HostConfig) {
				hc.NetworkMode = container.NetworkMode(netName)
				hc.Binds = binds
			},
			EndpointSettingsModifier: func(m map[string]*network.EndpointSettings) {
				es := m[netName]
				if es == nil {
					es = &network.EndpointSettings{}
					m[netName] = es
				}
				es.IPAMConfig = &network.EndpointIPAMConfig{IPv4Address: n.ip}
			},
			WaitingFor: probeStrategy{probe: func(ctx context.Context) error { return backend.Ready(ctx, n.kind, n.addr()) }},
		},
		Started: false,
		Logger:  slogPrintf{c.log},
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("docker %s: node %s: %w", c.opts.Backend, n.name, err)
	}
	// The engine carries out a create whose request was cancelled (Ctrl-C):
	// the create is waited for, bounded, so that the container is known
	// and removed with the others, and the interrupt reported after it.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), createTimeout)
	defer cancel()
	ctr, err := testcontainers.GenericContainer(cctx, req)
	if dc, ok := ctr.(*testcontainers.DockerContainer); ok && dc != nil {
		n.mu.Lock()
		n.c = dc
		n.mu.Unlock()
	}
	if err != nil {
		return fmt.Errorf("docker %s: node %s: create a container of image %s: %s%s", c.opts.Backend, n.name, c.image.Ref, engine.FirstLine(err), c.pullHint())
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("docker %s: node %s: %w", c.opts.Backend, n.name, err)
	}
	return nil
}

// createTimeout bounds the creation of one container (its image is there
// already: the provider resolved it before).
const createTimeout = time.Minute

// pullHint tells how to get the cluster's image when the engine lacks it.
func (c *Containers) pullHint() string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.lab.e.Client().ImageInspect(ctx, c.image.Ref); err == nil || !engine.IsNotFound(err) {
		return ""
	}
	return fmt.Sprintf(" (the image is not on this docker engine and could not be pulled: `locktest images build %s` builds locktest's own without a registry, or --image %s=REF names another)", c.image.Backend, c.image.Backend)
}

// startNode starts n's container and waits until it is ready.
func (c *Containers) startNode(ctx context.Context, n *node) error {
	n.mu.Lock()
	ctr := n.c
	n.mu.Unlock()
	t0 := time.Now()
	if err := ctr.Start(ctx); err != nil {
		tail := c.tail(n, logTailLines)
		quoted := ""
		if tail != "" {
			quoted = "; last output:\n\t" + strings.ReplaceAll(tail, "\n", "\n\t")
		}
		c.log.Warn("node did not start", "node", n.name, "addr", n.addr(), "err", err)
		return fmt.Errorf("docker %s: node %s (%s, image %s) not ready: %s%s", c.opts.Backend, n.name, n.addr(), c.image.Ref, engine.FirstLine(err), quoted)
	}
	pid, _ := n.hostPid(ctx)
	c.log.Info("node started", "node", n.name, "addr", n.addr(), "pid", pid, "container", engine.ShortID(n.id()), "took", time.Since(t0).Round(time.Millisecond))
	return nil
}

// tail returns the last lines of n's container output.
func (c *Containers) tail(n *node, lines int) string {
	id := n.id()
	if id == "" {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var b bytes.Buffer
	if err := containerLogs(ctx, n.cli, id, strconv.Itoa(lines), &b); err != nil {
		return ""
	}
	return strings.TrimSpace(b.String())
}

// containerLogs writes the container's stdout and stderr to w.
func containerLogs(ctx context.Context, cli *client.Client, id, tail string, w io.Writer) error {
	rc, err := cli.ContainerLogs(ctx, id, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true, Tail: tail})
	if err != nil {
		return err
	}
	defer rc.Close()
	_, err = stdcopy.StdCopy(w, w, rc)
	return err
}

// remove removes n's container, if any, killing it first. An error names
// the container left behind, which `locktest cleanup` removes later.
func (c *Containers) remove(ctx context.Context, n *node) error {
	id := n.id()
	if id == "" {
		return nil
	}
	if _, err := n.cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !engine.IsNotFound(err) {
		c.log.Warn("remove container", "node", n.name, "container", engine.ShortID(id), "err", engine.FirstLine(err))
		return fmt.Errorf("docker: node %s: remove container %s: %s", n.name, engine.ShortID(id), engine.FirstLine(err))
	}
	n.mu.Lock()
	n.c = nil
	n.mu.Unlock()
	c.log.Info("node removed", "node", n.name, "container", engine.ShortID(id))
	return nil
}

// driver is the docker provider's backend.Driver: a node is a container
// on the run's network, which it starts with testcontainers-go and
// signals through the Docker API and the container's host pid.
type driver struct{ c *Containers }

var _ backend.Driver[*node] = driver{}

// Node returns n at its container's fixed address.
func (d driver) Node(n *node) clusters.Node {
	return clusters.Node{Name: n.name, Addr: n.addr(), LogPath: n.logPath}
}

// pidTimeout bounds the engine's answer to Pid.
const pidTimeout = 10 * time.Second

// Pid returns the host pid of n's container's main process, 0 when it is
// not running (or the engine does not say).
func (d driver) Pid(n *node) int {
	ctx, cancel := context.WithTimeout(context.Background(), pidTimeout)
	defer cancel()
	pid, _ := n.hostPid(ctx)
	return pid
}

// Start creates the containers of ns and starts them (startGroup).
func (d driver) Start(ctx context.Context, ns []*node) error { return d.c.startGroup(ctx, ns) }

// Restart starts the containers of ns that are not running again, with
// the same address and writable layer (startGroup). A node that was never
// started is an error.
func (d driver) Restart(ctx context.Context, ns []*node) error {
	for _, n := range ns {
		if n.id() == "" {
			return fmt.Errorf("docker %s: restart %s: the node was never started", d.c.opts.Backend, n.name)
		}
	}
	return d.c.startGroup(ctx, ns)
}

// stopTimeout bounds Stop: an engine that does not answer (its runtime
// wedged) must not hold the run, or a test, forever.
const stopTimeout = 2 * time.Minute

// Stop removes n's container (SIGKILL, then removal with its writable
// layer); the collected logs stay in Dir. It takes at most stopTimeout,
// whatever ctx: a context that has ended, or that has no deadline, is
// replaced by one of stopTimeout, since Stop must not leave containers
// behind because the run was interrupted, nor wait forever on an engine
// that does not answer. An error names the container left (`locktest
// cleanup` removes it).
func (d driver) Stop(ctx context.Context, n *node) error {
	if _, ok := ctx.Deadline(); !ok || ctx.Err() != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), stopTimeout)
		defer cancel()
	}
	return d.c.remove(ctx, n)
}

// Kill sends SIGKILL to n's container through the Docker API and returns
// once it has stopped. The container, with its writable layer (the node's
// data), stays for Restart.
func (d driver) Kill(ctx context.Context, n *node) error { return d.c.kill(ctx, n) }

// kill is Kill of n; the cluster's lock must be held.
func (c *Containers) kill(ctx context.Context, n *node) error {
	pid, err := n.hostPid(ctx)
	if err != nil {
		return nil
	}
	id := n.id()
	wait := n.cli.ContainerWait(ctx, id, client.ContainerWaitOptions{Condition: container.WaitConditionNotRunning})
	if _, err := n.cli.ContainerKill(ctx, id, client.ContainerKillOptions{Signal: "SIGKILL"}); err != nil {
		return fmt.Errorf("docker %s: kill %s: %s", c.opts.Backend, n.name, engine.FirstLine(err))
	}
	select {
	case <-wait.Result:
	case err := <-wait.Error:
		return fmt.Errorf("docker %s: kill %s: wait: %s", c.opts.Backend, n.name, engine.FirstLine(err))
	case <-ctx.Done():
		return ctx.Err()
	}
	c.log.Info("node killed", "node", n.name, "pid", pid, "addr", n.addr())
	return nil
}

// Pause freezes n's process with SIGSTOP, sent to the container's host
// pid, and returns once the kernel reports every thread stopped. As with
// a local node, the kernel still accepts connections on its port: clients
// see timeouts, not refusals. When the container's process is not one of
// this host's (a remote daemon), or the server is several processes
// (PostgreSQL), the whole container is frozen through the Docker API
// (`docker pause`, the cgroup freezer) instead. The cluster has asked
// the engine already that the container runs (Pid).
func (d driver) Pause(ctx context.Context, n *node) error {
	c := d.c
	pid, err := n.localPid(ctx)
	if err != nil || kinds[n.kind].several {
		if _, err := n.cli.ContainerPause(ctx, n.id(), client.ContainerPauseOptions{}); err != nil {
			return fmt.Errorf("docker %s: pause %s: %s", c.opts.Backend, n.name, engine.FirstLine(err))
		}
		n.frozen = true
		c.log.Info("node paused", "node", n.name, "addr", n.addr(), "by", "docker pause")
		return nil
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return fmt.Errorf("docker %s: pause %s (host pid %d): %w", c.opts.Backend, n.name, pid, err)
	}
	if err := procfs.WaitStopped(pid, clusters.PauseWait); err != nil {
		return fmt.Errorf("docker %s: pause %s (host pid %d): %w", c.opts.Backend, n.name, pid, err)
	}
	c.log.Info("node paused", "node", n.name, "pid", pid, "addr", n.addr())
	return nil
}

// Resume thaws n's process with SIGCONT, or its container with `docker
// unpause` when Pause froze it so.
func (d driver) Resume(ctx context.Context, n *node) error {
	c := d.c
	if n.frozen {
		if _, err := n.cli.ContainerUnpause(ctx, n.id(), client.ContainerUnpauseOptions{}); err != nil && !engine.IsNotFound(err) {
			return fmt.Errorf("docker %s: resume %s: %s", c.opts.Backend, n.name, engine.FirstLine(err))
		}
		n.frozen = false
		c.log.Info("node resumed", "node", n.name, "addr", n.addr(), "by", "docker unpause")
		return nil
	}
	pid, err := n.localPid(ctx)
	if err != nil {
		return nil
	}
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("docker %s: resume %s (host pid %d): %w", c.opts.Backend, n.name, pid, err)
	}
	c.log.Info("node resumed", "node", n.name, "pid", pid, "addr", n.addr())
	return nil
}

// CollectLog writes n's container output (stdout and stderr, across
// restarts), under a line naming the container, to path and to n's
// LogPath. A node whose container was never created has none.
func (d driver) CollectLog(ctx context.Context, n *node, path string) error {
	id := n.id()
	if id == "" {
		return nil
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "# container %s of image %s, node %s at %s\n", engine.ShortID(id), d.c.image.Ref, n.name, n.addr())
	var errs []error
	if err := containerLogs(ctx, n.cli, id, "all", &b); err != nil {
		errs = append(errs, errors.New(engine.FirstLine(err)))
	}
	for _, p := range []string{path, n.logPath} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err == nil {
			err = os.WriteFile(p, b.Bytes(), 0o644)
			if err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// probeStrategy is a testcontainers wait strategy that polls a readiness
// check of the backend's own (a PING, a status request) from the host,
// against the container's address, until it passes, the container exits,
// or ctx ends.
type probeStrategy struct {
	probe func(ctx context.Context) error
}

var _ wait.Strategy = probeStrategy{}

func (s probeStrategy) WaitUntilReady(ctx context.Context, t wait.StrategyTarget) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	last := errors.New("no answer yet")
	var patience backend.Patience
	for i := 0; ; i++ {
		if i%10 == 0 {
			st, err := t.State(ctx)
			if err == nil && st != nil && !st.Running {
				return fmt.Errorf("the container exited (%s, exit code %d)", st.Status, st.ExitCode)
			}
		}
		pctx, done := patience.Query(ctx)
		last = s.probe(pctx)
		done(last)
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), last)
		case <-tick.C:
		}
	}
}

// errNotRunning marks a node whose container is not running.
var errNotRunning = errors.New("container is not running")

// slogPrintf adapts testcontainers' Printf logger to slog at debug level.
type slogPrintf struct{ lg *slog.Logger }

func (s slogPrintf) Printf(format string, v ...any) {
	s.lg.Debug(strings.TrimSpace(fmt.Sprintf(format, v...)), "from", "testcontainers")
}
