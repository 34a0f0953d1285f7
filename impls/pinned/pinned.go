// Package pinned holds the one connection that a session-lock client keeps
// for its whole life. The SQL impls' locks belong to the server session
// behind that connection: the server frees them when the session ends.
//
// After an error whose outcome is unknown the client drops the connection,
// which ends the session; the next call opens a new one. Each connection
// opened is a new generation, and a lock or transaction taken in an
// earlier generation is no longer held: its release reports
// impls.ErrNotHeld without asking the server.
package pinned

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/locktest/locktest/impls"
)

// Driver is what a Session needs of one kind of connection.
type Driver[C any] struct {
	// Open connects and returns the connection with the server's id of its
	// session (a MariaDB connection id, a PostgreSQL backend pid).
	Open func(ctx context.Context) (C, int64, error)
	// Setup, if set, runs on the first connection opened, before it is
	// handed out (schema creation), until it succeeds once.
	Setup func(ctx context.Context, c C) error
	// Discard closes a connection for good, which ends its session.
	Discard func(c C)
	// Alive, if set, reports whether an open connection is still usable;
	// without it, a connection is usable until it is dropped.
	Alive func(c C) bool
}

// Session is one client's pinned connection and its bookkeeping: which
// generation took each lock, and whether a lock-holding transaction is
// open. It is not safe for concurrent use, as an impls.Client need not be.
type Session[C any] struct {
	Driver[C]
	// Process is the worker's process id, and Tag the letter put before the
	// session id in lock values ("c" for a connection, "b" for a backend).
	Process int
	Tag     string

	conn  C
	open  bool
	gen   uint64 // connections opened so far; the current one's generation
	id    int64  // the server's id of the current session
	setup bool
	seq   uint64
	held  map[string]uint64 // lock → the generation that took it
	tx    uint64            // generation of the open transaction; 0: none
}

// Get returns the pinned connection, opening it (and running Setup, until
// it has succeeded once) when there is none or it is no longer alive. An
// error of Open or Setup is marked impls.NotSent: no request of the
// caller's op has reached the server yet, so its op certainly changed
// nothing.
func (s *Session[C]) Get(ctx context.Context) (C, error) {
	if c, ok := s.Current(); ok {
		return c, nil
	}
	s.open = false
	var zero C
	c, id, err := s.Open(ctx)
	if err != nil {
		return zero, impls.NotSent(err)
	}
	if !s.setup && s.Setup != nil {
		if err := s.Setup(ctx, c); err != nil {
			s.Discard(c)
			return zero, impls.NotSent(fmt.Errorf("create schema: %w", err))
		}
	}
	s.setup = true
	s.conn, s.id, s.open = c, id, true
	s.gen++
	return c, nil
}

// Current returns the pinned connection if one is open and alive.
func (s *Session[C]) Current() (C, bool) {
	if !s.open || s.Alive != nil && !s.Alive(s.conn) {
		var zero C
		return zero, false
	}
	return s.conn, true
}

// Drop closes the pinned connection for good; the server ends the session
// and frees its locks as soon as it sees the connection close.
func (s *Session[C]) Drop() {
	if s.open {
		s.Discard(s.conn)
		s.open = false
	}
}

// Close drops the pinned connection; it never fails.
func (s *Session[C]) Close() error {
	s.Drop()
	return nil
}

// Value returns a lock value unique to this acquire: the process, the
// session's id and a sequence number, plus random bits that keep a
// restarted worker apart from its previous life.
func (s *Session[C]) Value() string {
	s.seq++
	return fmt.Sprintf("p%d-%s%d-%d-%06x", s.Process, s.Tag, s.id, s.seq, rand.Uint32()&0xffffff)
}

// Hold notes that the current session took lock.
func (s *Session[C]) Hold(lock string) {
	if s.held == nil {
		s.held = map[string]uint64{}
	}
	s.held[lock] = s.gen
}

// Unhold forgets lock and returns the connection to release it on; ok is
// false when the session that took it is gone (or it was never taken).
func (s *Session[C]) Unhold(lock string) (c C, ok bool) {
	gen, held := s.held[lock]
	delete(s.held, lock)
	c, alive := s.Current()
	return c, held && gen == s.gen && alive
}

// HoldTx notes that a transaction holding a lock is open on the current
// connection.
func (s *Session[C]) HoldTx() { s.tx = s.gen }

// EndTx forgets the transaction HoldTx noted. It reports whether there was
// one, and returns the connection to end it on, with current true, when
// that transaction is on the connection still open.
func (s *Session[C]) EndTx() (c C, was, current bool) {
	gen := s.tx
	s.tx = 0
	c, alive := s.Current()
	return c, gen != 0, gen != 0 && gen == s.gen && alive
}
