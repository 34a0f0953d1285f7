package backend

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// readyDialTimeout bounds the TCP dial that comes before each readiness
// query, so that a client library does not log a failed dial on every
// poll of a node that is still starting.
const readyDialTimeout = 300 * time.Millisecond

// Ready asks the node of kind at addr (host:port) once, over the network
// as a client would, whether it serves: a Redis node or a sentinel answers
// PING; an etcd member answers a status request that names a leader and
// reports no error; a ZooKeeper peer reports a mode in `srvr` (it serves
// in a quorum); a SQL server runs a query as the impls log in (root,
// postgres). It is the readiness every provider waits for; a provider that
// must also know the node is its own (a SQL server's data directory) asks
// that beside it. A node that does not accept connections, answers
// otherwise or not within ctx is an error.
func Ready(ctx context.Context, kind, addr string) error {
	d := net.Dialer{Timeout: readyDialTimeout}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	conn.Close()
	switch kind {
	case KindRedis, KindSentinel:
		c := RedisDataClient(addr)
		defer c.Close()
		return c.Ping(ctx).Err()
	case KindEtcd:
		return etcdReady(ctx, addr)
	case KindZooKeeper:
		_, err := ZooKeeperRole(ctx, addr)
		return err
	case KindMariaDB:
		return PingMariaDB(ctx, addr)
	case KindPostgres:
		return PingPostgres(ctx, addr)
	}
	return fmt.Errorf("no node kind %q", kind)
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

// ReadyPoll is how often WaitReady asks again, unless told otherwise.
const ReadyPoll = 50 * time.Millisecond

// WaitReady asks Ready every poll (ReadyPoll when 0) until the node
// serves, ctx ends, or alive (when not nil) reports that the node's
// process is gone. Its error names the node's address and quotes the last
// answer.
func WaitReady(ctx context.Context, kind, addr string, poll time.Duration, alive func() error) error {
	if poll <= 0 {
		poll = ReadyPoll
	}
	last := errors.New("no answer yet")
	for {
		if alive != nil {
			if err := alive(); err != nil {
				return fmt.Errorf("%s %s: %w (last answer: %v)", kind, addr, err, last)
			}
		}
		qctx, cancel := context.WithTimeout(ctx, time.Second)
		last = Ready(qctx, kind, addr)
		cancel()
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s %s not ready: %w (last answer: %v)", kind, addr, ctx.Err(), last)
		case <-time.After(poll):
		}
	}
}
