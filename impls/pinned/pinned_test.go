package pinned

import (
	"context"
	"errors"
	"regexp"
	"testing"

	"github.com/locktest/locktest/impls"
)

// fakeConn stands for a connection; closed is set by Discard.
type fakeConn struct {
	id     int64
	closed bool
}

// newFake returns a session over fake connections numbered from 100, and
// the connections it opened.
func newFake(setupErr error) (*Session[*fakeConn], *[]*fakeConn) {
	var opened []*fakeConn
	s := &Session[*fakeConn]{Process: 3, Tag: "c", Driver: Driver[*fakeConn]{
		Open: func(context.Context) (*fakeConn, int64, error) {
			c := &fakeConn{id: int64(100 + len(opened))}
			opened = append(opened, c)
			return c, c.id, nil
		},
		Setup:   func(context.Context, *fakeConn) error { return setupErr },
		Discard: func(c *fakeConn) { c.closed = true },
		Alive:   func(c *fakeConn) bool { return !c.closed },
	}}
	return s, &opened
}

// TestALockOfAnEarlierConnectionIsNotHeld: a lock taken on a connection
// that was dropped is not released on the next one.
func TestALockOfAnEarlierConnectionIsNotHeld(t *testing.T) {
	ctx := context.Background()
	s, opened := newFake(nil)
	c1, err := s.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s.Hold("x")
	s.Hold("y")
	if c, ok := s.Unhold("x"); !ok || c != c1 {
		t.Fatalf("Unhold(x) on the connection that took it = %v, %v; want the connection, true", c, ok)
	}
	if _, ok := s.Unhold("x"); ok {
		t.Fatal("Unhold(x) twice: the second is held")
	}
	s.Drop()
	if !c1.closed {
		t.Fatal("Drop did not discard the connection")
	}
	c2, err := s.Get(ctx)
	if err != nil || c2 == c1 || len(*opened) != 2 {
		t.Fatalf("Get after Drop = %v, %v with %d opened; want a second connection", c2, err, len(*opened))
	}
	if _, ok := s.Unhold("y"); ok {
		t.Fatal("a lock of the dropped connection is held on the new one")
	}
}

// TestATransactionEndsWithItsConnection: EndTx finds the transaction only
// on the connection it was opened on, and only once.
func TestATransactionEndsWithItsConnection(t *testing.T) {
	ctx := context.Background()
	s, _ := newFake(nil)
	if _, was, _ := s.EndTx(); was {
		t.Fatal("a transaction before any was held")
	}
	c1, _ := s.Get(ctx)
	s.HoldTx()
	if c, was, cur := s.EndTx(); !was || !cur || c != c1 {
		t.Fatalf("EndTx = %v, %v, %v; want the connection, true, true", c, was, cur)
	}
	if _, was, _ := s.EndTx(); was {
		t.Fatal("EndTx twice: the second found a transaction")
	}
	s.HoldTx()
	c1.closed = true // the driver saw the connection die
	if _, was, cur := s.EndTx(); !was || cur {
		t.Fatalf("EndTx after the connection died = %v, %v; want true, false", was, cur)
	}
	c2, _ := s.Get(ctx)
	if c2 == c1 {
		t.Fatal("Get handed out a dead connection")
	}
}

// TestValuesNameTheSession: values carry the process, the tag and the
// session id, and never repeat.
func TestValuesNameTheSession(t *testing.T) {
	s, _ := newFake(nil)
	if _, err := s.Get(context.Background()); err != nil {
		t.Fatal(err)
	}
	a, b := s.Value(), s.Value()
	form := regexp.MustCompile(`^p3-c100-[12]-[0-9a-f]{6}$`)
	if !form.MatchString(a) || !form.MatchString(b) || a == b {
		t.Fatalf("values %q, %q; want two different p3-c100-<n>-<6 hex digits>", a, b)
	}
}

// TestSetupRunsUntilItSucceeds: a failed setup discards the connection
// and is tried again on the next Get.
func TestSetupRunsUntilItSucceeds(t *testing.T) {
	ctx := context.Background()
	boom := errors.New("boom")
	s, opened := newFake(boom)
	if _, err := s.Get(ctx); !errors.Is(err, boom) {
		t.Fatalf("Get with a failing setup: %v, want boom", err)
	}
	if !(*opened)[0].closed {
		t.Fatal("the connection whose setup failed was not discarded")
	}
	calls := 0
	s.Setup = func(context.Context, *fakeConn) error { calls++; return nil }
	for range 2 {
		if _, err := s.Get(ctx); err != nil {
			t.Fatal(err)
		}
		s.Drop()
	}
	if calls != 1 {
		t.Fatalf("setup ran %d times after it failed once, want 1", calls)
	}
}

// TestAConnectionNotOpenedIsNotSent: an error of Open or of Setup is
// marked impls.ErrNotSent (the op's request never reached the server),
// keeps its cause and its message, and nothing is held afterwards.
func TestAConnectionNotOpenedIsNotSent(t *testing.T) {
	ctx := context.Background()
	refused := errors.New("failed to connect: timeout")
	for _, tc := range []struct {
		name    string
		open    error
		setup   error
		message string
	}{
		{"open", refused, nil, "failed to connect: timeout"},
		{"setup", nil, refused, "create schema: failed to connect: timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := newFake(tc.setup)
			if tc.open != nil {
				s.Open = func(context.Context) (*fakeConn, int64, error) { return nil, 0, tc.open }
			}
			_, err := s.Get(ctx)
			if !errors.Is(err, impls.ErrNotSent) || !errors.Is(err, refused) {
				t.Fatalf("Get = %v, want an error marked ErrNotSent that wraps its cause", err)
			}
			if err.Error() != tc.message {
				t.Errorf("message %q, want %q", err.Error(), tc.message)
			}
			if _, ok := s.Current(); ok {
				t.Error("a connection is current after Get failed")
			}
		})
	}
}
