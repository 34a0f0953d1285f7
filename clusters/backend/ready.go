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

// Patience is how long each readiness query of one wait may take: a
// second at first, twice as long after each query that ran out of its
// time, up to 8 s. A server that a loaded host makes slow to answer (a
// PostgreSQL backend's fork and login, under CI's load) is then not asked
// again and again with less time than its answer needs, which failed
// every query until the wait's end. The zero Patience is ready for use;
// one wait uses one Patience, from one goroutine.
type Patience struct{ limit time.Duration }

// The bounds of Patience.
const (
	firstQueryLimit = time.Second
	lastQueryLimit  = 8 * time.Second
)

// Query returns the context for the next query, a child of ctx with the
// query's limit, and the function that ends it, which takes the query's
// error: a query that ran out of its limit (not ctx's) doubles the next
// one's.
func (p *Patience) Query(ctx context.Context) (context.Context, func(error)) {
	if p.limit == 0 {
		p.limit = firstQueryLimit
	}
	qctx, cancel := context.WithTimeout(ctx, p.limit)
	return qctx, func(err error) {
		ranOut := err != nil && errors.Is(qctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil
		cancel()
		p.limit = nextLimit(p.limit, ranOut)
	}
}

// nextLimit is the limit of the query after one whose limit was limit
// and which ran out of it or not.
func nextLimit(limit time.Duration, ranOut bool) time.Duration {
	if !ranOut {
		return limit
	}
	return min(2*limit, lastQueryLimit)
}

// Limit returns the limit of the next query.
func (p *Patience) Limit() time.Duration {
	if p.limit == 0 {
		return firstQueryLimit
	}
	return p.limit
}

// WaitReady asks Ready every poll (ReadyPoll when 0), each query with
// the time Patience gives it, until the node serves, ctx ends, or alive (when not nil) reports that the node's
// process is gone. Its error names the node's address and quotes the last
// answer.
func WaitReady(ctx context.Context, kind, addr string, poll time.Duration, alive func() error) error {
	if poll <= 0 {
		poll = ReadyPoll
	}
	last := errors.New("no answer yet")
	var patience Patience
	for {
		if alive != nil {
			if err := alive(); err != nil {
				return fmt.Errorf("%s %s: %w (last answer: %v)", kind, addr, err, last)
			}
		}
		qctx, done := patience.Query(ctx)
		last = Ready(qctx, kind, addr)
		done(last)
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
