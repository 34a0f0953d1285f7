// Package engine is locktest's connection to a Docker engine and what
// every user of the engine shares: the docker provider (clusters/docker),
// the image builder (clusters/images) and the SSH lab (clusters/sshlab).
//
// Everything a run creates carries its labels ([LabelRun], [LabelOwnerPID],
// [LabelOwnerStart]) and is removed at the run's end; [Engine.Cleanup]
// removes what a driver that was killed outright left. Ryuk,
// testcontainers' reaper, needs an image that cannot be pulled without a
// registry: [Open] disables it, and this package cleans up by label
// itself.
package engine

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/containerd/errdefs"
	"github.com/moby/moby/client"
	tclog "github.com/testcontainers/testcontainers-go/log"

	"github.com/locktest/locktest/internal/procfs"
)

// Labels of the containers and networks of a run, and of built images.
const (
	// LabelRun holds the id of the run (its docker.Lab) that made the
	// object.
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
		return nil, fmt.Errorf("docker daemon not reachable at %s: %s", cli.DaemonHost(), FirstLine(err))
	}
	return &Engine{cli: cli, log: lg}, nil
}

// Client returns the engine's Docker API client.
func (e *Engine) Client() *client.Client { return e.cli }

// Host returns where the engine is, e.g. unix:///var/run/docker.sock.
func (e *Engine) Host() string { return e.cli.DaemonHost() }

// Logger returns the logger Open was given: the engine's users log what
// they make and remove there.
func (e *Engine) Logger() *slog.Logger { return e.log }

// Close closes the connection.
func (e *Engine) Close() error { return e.cli.Close() }

// OwnerLabels returns the labels naming this process as the owner of the
// run run: LabelRun, LabelOwnerPID and LabelOwnerStart.
func OwnerLabels(run string) map[string]string {
	pid := os.Getpid()
	return map[string]string{
		LabelRun:        run,
		LabelOwnerPID:   strconv.Itoa(pid),
		LabelOwnerStart: procfs.StartTime(pid),
	}
}

// OwnerAlive reports whether the driver named by an object's labels still
// runs: its pid exists and, when the labels record one, has the same start
// time. Objects without an owner pid are never taken for orphans.
func OwnerAlive(labels map[string]string) bool {
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

// FirstLine returns the first line of err's message: the Docker API's
// errors may go on for lines.
func FirstLine(err error) string {
	s := err.Error()
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

// IsNotFound reports whether err is the engine's answer that the object
// asked for does not exist.
func IsNotFound(err error) bool { return errdefs.IsNotFound(err) }

// ShortID returns the first 12 characters of a Docker object's id, as
// docker ps shows it.
func ShortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
