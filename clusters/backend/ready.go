package backend

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"
)

// readyDialTimeout bounds the TCP dial that comes before each readiness
// query, so that a client library does not log a failed dial on every
// poll of a node that is still starting.
const readyDialTimeout = 300 * time.Millisecond

// Ready asks the node of kind at addr (host:port) once, over the network
// as a client would, whether it serves (Kind.Ready): a Redis node or a sentinel answers
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
	k, err := KindOf(kind)
	if err != nil {
		return err
	}
	return k.Ready(ctx, addr)
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
