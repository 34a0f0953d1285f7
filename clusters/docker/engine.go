// Package docker is the cluster provider that runs the nodes of a lock
// service as Docker containers, beside the local
// provider's processes. A run gets a user-defined bridge network of its own
// (a [Lab]); each node is a container on it with a fixed address, created,
// started and waited for with testcontainers-go. The faults go below
// testcontainers, through the Docker API (github.com/moby/moby/client) and
// the container's host pid: SIGSTOP and SIGCONT for pauses, SIGKILL and a
// start of the same container for kills, iptables rules inside the
// container's network namespace for partitions and loss, and the clock shim
// bind-mounted into the container for clock faults. The lock clients stay on
// the host and dial the containers' addresses.
//
// Everything a run creates carries its labels ([LabelRun], [LabelOwnerPID],
// [LabelOwnerStart]) and is removed at the run's end; [Cleanup] removes what
// a driver that was killed outright left. Ryuk, testcontainers' reaper,
// needs an image that cannot be pulled without a registry: [Open] disables
// it, and this package cleans up by label itself.
//
// Images are the official ones by name and tag unless the run names others
// or locktest built its own with [Engine.BuildImages] (`locktest images
// build`), from the host's installed packages without pulling anything.
package docker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/moby/moby/client"
	tclog "github.com/testcontainers/testcontainers-go/log"

	"github.com/locktest/locktest/internal/procfs"
)

// Labels of the containers and networks of a run, and of built images.
const (
	// LabelRun holds the id of the run (its Lab) that made the object.
	LabelRun = "locktest.run"
	// LabelOwnerPID holds the pid of the driver that owns the run.
	LabelOwnerPID = "locktest.owner-pid"
	// LabelOwnerStart holds the owner's start time (field 22 of
	// /proc/<pid>/stat), so that a recycled pid is not taken for the owner.
	LabelOwnerStart = "locktest.owner-start"
	// LabelNode names the node a container runs.
	LabelNode = "locktest.node"
	// LabelImage marks an image built by locktest (value "1"); built images
	// are kept between runs.
	LabelImage = "locktest.image"
	// LabelBackend names the backend a built image serves.
	LabelBackend = "locktest.backend"
	// LabelHash is the hash of what a built image was made from; a build
	// whose inputs have the same hash reuses the image.
	LabelHash = "locktest.hash"
	// LabelNodeProgram marks an image whose entrypoint is locktest's own
	// node program (`locktest node etcd`), which takes locktest's flags
	// rather than the upstream server's.
	LabelNodeProgram = "locktest.node-program"
)

// Engine is a connection to a Docker engine. Its methods are safe for
// concurrent use.
type Engine struct {
	cli *client.Client
	log *slog.Logger
}

var tcOnce sync.Once

// Open connects to the Docker engine named by the environment (DOCKER_HOST,
// default the local socket) and checks that it answers. It disables Ryuk
// (TESTCONTAINERS_RYUK_DISABLED=true) before testcontainers reads its
// configuration, and silences testcontainers' global log (a cluster passes
// its own logger to every container it makes, at debug level). A daemon
// that does not answer is an error naming where it was looked for.
func Open(ctx context.Context, lg *slog.Logger) (*Engine, error) {
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	tcOnce.Do(func() {
		// testcontainers reads its configuration once; this must come first.
		os.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true")
		// Its global log (connection banners) would go to whichever run
		// came first; each container gets the run's logger instead.
		tclog.SetDefault(tclog.NewNoopLogger())
	})
	cli, err := client.New(client.FromEnv)
	if err != nil {
		return nil, fmt.Errorf("docker: %w", err)
	}
	if _, err := cli.Ping(ctx, client.PingOptions{}); err != nil {
		cli.Close()
		return nil, fmt.Errorf("docker daemon not reachable at %s: %s", cli.DaemonHost(), firstLine(err))
	}
	return &Engine{cli: cli, log: lg}, nil
}

// Client returns the engine's Docker API client.
func (e *Engine) Client() *client.Client { return e.cli }

// Host returns where the engine is, e.g. unix:///var/run/docker.sock.
func (e *Engine) Host() string { return e.cli.DaemonHost() }

// Close closes the connection.
func (e *Engine) Close() error { return e.cli.Close() }

// slogPrintf adapts testcontainers' Printf logger to slog at debug level.
type slogPrintf struct{ lg *slog.Logger }

func (s slogPrintf) Printf(format string, v ...any) {
	s.lg.Debug(strings.TrimSpace(fmt.Sprintf(format, v...)), "from", "testcontainers")
}

// ownerLabels returns the labels naming this process as the owner.
func ownerLabels(run string) map[string]string {
	pid := os.Getpid()
	return map[string]string{
		LabelRun:        run,
		LabelOwnerPID:   strconv.Itoa(pid),
		LabelOwnerStart: procfs.StartTime(pid),
	}
}

// ownerAlive reports whether the driver named by an object's labels still
// runs: its pid exists and, when the labels record one, has the same start
// time. Objects without an owner pid are never taken for orphans.
func ownerAlive(labels map[string]string) bool {
	pid, err := strconv.Atoi(labels[LabelOwnerPID])
	if err != nil || pid <= 0 {
		return true
	}
	now := procfs.StartTime(pid)
	if now == "" {
		return false
	}
	if want := labels[LabelOwnerStart]; want != "" && want != now {
		return false
	}
	return true
}

func firstLine(err error) string {
	s := err.Error()
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

// errNotRunning marks a node whose container is not running.
var errNotRunning = errors.New("container is not running")
