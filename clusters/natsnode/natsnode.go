// Package natsnode is the body of one NATS server run by locktest itself:
// the hidden `locktest node nats` command embeds
// github.com/nats-io/nats-server/v2 with JetStream on, so a NATS cluster
// needs nothing installed and each server is a process of its own that the
// harness can pause, kill, power off and restart. Every provider starts
// these processes from the backend's one definition (clusters/backend,
// backend "nats").
package natsnode

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/locktest/locktest/clusters/backend"
	"github.com/locktest/locktest/internal/nodeflags"
)

// readyTimeout bounds how long a server waits to accept clients after its
// start; JetStream's meta leader is the provider's readiness query.
const readyTimeout = time.Minute

// ClusterName is the name of every locktest NATS cluster's route mesh.
const ClusterName = "locktest"

// Main runs one NATS server until ctx is done or the process gets SIGTERM
// or SIGINT, then shuts it down. args are the command-line flags; -h
// prints their usage to stderr. A bad flag, an address that cannot be
// bound or a store directory that cannot be used is returned as an error
// naming what is wrong.
func Main(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("locktest node nats", flag.ContinueOnError)
	fs.SetOutput(os.Stderr)
	name := fs.String("name", "", "server name, unique in the cluster (required)")
	storeDir := fs.String("store-dir", "", "JetStream's store directory (required); an existing one is reused, and the server recovers its streams from it")
	listen := fs.String("listen", "", "client address to listen on, host:port (required)")
	advertise := fs.String("advertise", "", "the host the clients and the other servers reach this one at; the listen address's host when empty")
	clusterListen := fs.String("cluster-listen", "", "route address to listen on, host:port; empty runs a server of its own, with no cluster")
	routes := fs.String("routes", "", "the other servers' route addresses, host:port, comma-separated")
	monitor := fs.String("monitor", "", "monitoring address to listen on, host:port (/jsz and the rest); empty serves none")
	sync := fs.String("sync", "", "how often JetStream syncs its files: a duration, or always (every write); empty keeps the server's default of 2m")
	logFile := fs.String("log-file", "", "where the server logs; empty means stderr")
	if err := nodeflags.Parse(fs, "nats node", args, "name", "store-dir", "listen"); err != nil {
		if errors.Is(err, nodeflags.ErrHelp) {
			return nil // the usage went to stderr
		}
		return err
	}
	opts, err := Options(*name, *storeDir, *listen, *advertise, *clusterListen, *routes, *sync)
	if err != nil {
		return err
	}
	if *monitor != "" {
		if opts.HTTPHost, opts.HTTPPort, err = hostPort("monitor", *monitor); err != nil {
			return err
		}
	}
	opts.LogFile = *logFile
	if err := os.MkdirAll(*storeDir, 0o700); err != nil {
		return fmt.Errorf("nats node %s: store dir: %w", *name, err)
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return fmt.Errorf("nats node %s: %w", *name, err)
	}
	s.ConfigureLogger()
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	go s.Start()
	if !s.ReadyForConnections(readyTimeout) {
		s.Shutdown()
		return fmt.Errorf("nats node %s: not accepting clients on %s after %v (its log says why)", *name, *listen, readyTimeout)
	}
	done := make(chan struct{})
	go func() { s.WaitForShutdown(); close(done) }()
	select {
	case <-ctx.Done():
		s.Shutdown()
		<-done
		return nil
	case <-done:
		return fmt.Errorf("nats node %s: server stopped", *name)
	}
}

// Options returns the embedded server's options for a server called name
// that keeps JetStream's files in storeDir, serves clients on listen and
// announces advertise (listen's host when empty), and, when clusterListen
// is set, joins the route mesh of routes (the other servers' route
// addresses) on it. sync is JetStream's sync setting: "" keeps the
// server's default (a sync every two minutes), "always" syncs every
// write, a duration syncs that often. Bad values are errors naming the
// flag.
func Options(name, storeDir, listen, advertise, clusterListen, routes, sync string) (*server.Options, error) {
	host, port, err := hostPort("listen", listen)
	if err != nil {
		return nil, err
	}
	if advertise == "" {
		advertise = host
	}
	opts := &server.Options{
		ServerName: name, Host: host, Port: port, ClientAdvertise: net.JoinHostPort(advertise, strconv.Itoa(port)),
		JetStream: true, StoreDir: storeDir,
		// The harness stops the server by its signals, which Main takes.
		NoSigs: true, Logtime: true,
	}
	st, err := backend.ParseNatsSync(sync)
	if err != nil {
		return nil, fmt.Errorf("nats node: --sync %q must be always or a positive duration", sync)
	}
	opts.SyncAlways, opts.SyncInterval = st.Always, st.Interval
	if clusterListen == "" {
		if routes != "" {
			return nil, errors.New("nats node: --routes needs --cluster-listen")
		}
		return opts, nil
	}
	chost, cport, err := hostPort("cluster-listen", clusterListen)
	if err != nil {
		return nil, err
	}
	opts.Cluster = server.ClusterOpts{Name: ClusterName, Host: chost, Port: cport, Advertise: net.JoinHostPort(advertise, strconv.Itoa(cport))}
	for r := range strings.SplitSeq(routes, ",") {
		if r = strings.TrimSpace(r); r == "" {
			continue
		}
		if _, _, err := hostPort("routes", r); err != nil {
			return nil, err
		}
		opts.Routes = append(opts.Routes, &url.URL{Scheme: "nats", Host: r})
	}
	return opts, nil
}

// hostPort splits the value of flag, host:port with a port above 0.
func hostPort(flag, v string) (string, int, error) {
	host, p, err := net.SplitHostPort(v)
	port, perr := strconv.Atoi(p)
	if err != nil || perr != nil || port <= 0 || port > 65535 || host == "" {
		return "", 0, fmt.Errorf("nats node: --%s %q must be host:port", flag, v)
	}
	return host, port, nil
}
