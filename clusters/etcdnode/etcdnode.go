// Package etcdnode is the body of one etcd member run by locktest itself: the
// hidden `locktest node etcd` command embeds go.etcd.io/etcd/server/v3/embed,
// so an etcd cluster needs nothing installed and each member is a process of
// its own that the harness can pause, kill and restart. The local provider
// (clusters/local, backend "etcd") starts and watches these processes.
package etcdnode

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"

	"github.com/locktest/locktest/clusters/backend"
	"github.com/locktest/locktest/internal/nodeflags"
)

// readyTimeout bounds how long a member waits to join its cluster before it
// gives up; the provider's own readiness check usually ends the wait much
// earlier by killing a member that is not ready.
const readyTimeout = time.Minute

// Main runs one etcd member until ctx is done or the process gets SIGTERM or
// SIGINT, then stops it (see hardStop). args are the command-line flags;
// -h prints their usage to stderr. A bad flag, a port that cannot be bound
// or a data directory that cannot be used is returned as an error naming
// what is wrong.
func Main(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("locktest node etcd", flag.ContinueOnError)
	fs.SetOutput(os.Stderr)
	name := fs.String("name", "", "member name (required)")
	dataDir := fs.String("data-dir", "", "data directory (required); an existing one is reused, and the member rejoins its cluster from it")
	clientURL := fs.String("listen-client-urls", "", "client URL to listen on and advertise, e.g. http://127.0.0.1:2379 (required)")
	peerURL := fs.String("listen-peer-urls", "", "peer URL to listen on and advertise, e.g. http://127.0.0.1:2380 (required)")
	cluster := fs.String("initial-cluster", "", "every member as name=peerURL, comma-separated (required)")
	token := fs.String("initial-cluster-token", "locktest", "cluster token of a new cluster")
	tickMs := fs.Uint("tick-ms", uint(backend.DefaultEtcdTiming.TickMs), "raft heartbeat interval in ms")
	electionMs := fs.Uint("election-ms", uint(backend.DefaultEtcdTiming.ElectionMs), "raft election timeout in ms")
	logFile := fs.String("log-file", "", "where the member logs (JSON lines); empty means stderr")
	if err := nodeflags.Parse(fs, "etcd node", args, "name", "data-dir", "listen-client-urls", "listen-peer-urls", "initial-cluster"); err != nil {
		if errors.Is(err, nodeflags.ErrHelp) {
			return nil // the usage went to stderr
		}
		return err
	}
	if *tickMs == 0 || *electionMs < 5**tickMs {
		return fmt.Errorf("etcd node: --election-ms (%d) must be at least 5 times --tick-ms (%d), and --tick-ms positive", *electionMs, *tickMs)
	}
	cu, err := parseURL("listen-client-urls", *clientURL)
	if err != nil {
		return err
	}
	pu, err := parseURL("listen-peer-urls", *peerURL)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(*dataDir, 0o700); err != nil {
		return fmt.Errorf("etcd node %s: data dir: %w", *name, err)
	}

	cfg := embed.NewConfig()
	cfg.Name = *name
	cfg.Dir = *dataDir
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	cfg.InitialCluster = *cluster
	cfg.InitialClusterToken = *token
	// A member restarted on its data directory ignores the initial cluster
	// and rejoins from its WAL.
	cfg.ClusterState = embed.ClusterStateFlagNew
	cfg.TickMs, cfg.ElectionMs = *tickMs, *electionMs
	cfg.Logger, cfg.LogLevel = "zap", "info"
	if *logFile != "" {
		cfg.LogOutputs = []string{*logFile}
	} else {
		cfg.LogOutputs = []string{embed.StdErrLogOutput}
	}

	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return fmt.Errorf("etcd node %s: %w", *name, err)
	}
	t := time.NewTimer(readyTimeout)
	defer t.Stop()
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return fmt.Errorf("etcd node %s: %w", *name, err)
	case <-ctx.Done():
		hardStop(e)
		return nil
	case <-t.C:
		e.Close()
		return fmt.Errorf("etcd node %s: not ready after %v", *name, readyTimeout)
	}
	select {
	case err := <-e.Err():
		hardStop(e)
		if err != nil {
			return fmt.Errorf("etcd node %s: %w", *name, err)
		}
		return errors.New("etcd node " + *name + ": server stopped")
	case <-e.Server.StopNotify():
		return fmt.Errorf("etcd node %s: server stopped", *name)
	case <-ctx.Done():
		hardStop(e)
		return nil
	}
}

// hardStop stops the member's raft loop and storage without the leadership
// transfer of a graceful etcd stop, which waits up to five seconds for a
// transferee that, when the whole cluster is being stopped, is stopping too.
// Every entry the member acknowledged is in its fsynced WAL, so a restart on
// the same data directory rejoins with nothing lost; the process exits
// right after, which closes its listeners.
func hardStop(e *embed.Etcd) {
	e.Server.HardStop()
}

// parseURL parses the value of flag as an http URL with a host:port.
func parseURL(flag, s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "http" || u.Port() == "" || strings.Contains(s, ",") {
		return nil, fmt.Errorf("etcd node: --%s %q must be one http://host:port URL", flag, s)
	}
	return u, nil
}
