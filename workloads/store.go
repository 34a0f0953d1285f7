package workloads

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/internal/tick"
)

// Mode says how the resource store judges writes.
type Mode string

// The resource modes.
const (
	// ModeNone accepts every write: the resource trusts the lock.
	ModeNone Mode = "none"
	// ModeFenced rejects a write whose fencing token is lower than the
	// highest it accepted (Kleppmann's remedy); a write with no token is
	// rejected too.
	ModeFenced Mode = "fenced"
	// ModeCheckAndSet accepts a write only from the current claimant: a
	// holder first claims the resource with its unique lock value (antirez's
	// alternative to a monotonic token).
	ModeCheckAndSet Mode = "check-and-set"
	// ModeEtcdGuarded keeps the resource in the lock service itself: each
	// write is a transaction guarded by the writer's lock ownership
	// (impls.GuardedWriter), so the store is not used. Only impls whose
	// clients have that ability can run it.
	ModeEtcdGuarded Mode = "etcd-guarded"
)

// Modes returns every resource mode, in the order the help and the docs
// list them.
func Modes() []Mode { return []Mode{ModeNone, ModeFenced, ModeCheckAndSet, ModeEtcdGuarded} }

// ParseMode validates a resource mode name.
func ParseMode(s string) (Mode, error) {
	var names []string
	for _, m := range Modes() {
		if string(m) == s {
			return m, nil
		}
		names = append(names, string(m))
	}
	return "", fmt.Errorf("unknown resource mode %q (want %s)", s, strings.Join(names, ", "))
}

// StoreRequest is one request to the resource store, sent as a JSON line.
type StoreRequest struct {
	F         string  `json:"f"` // read, write or claim
	Process   int     `json:"process"`
	Lock      string  `json:"lock"`
	N         int64   `json:"n,omitempty"`
	Token     *uint64 `json:"token,omitempty"`
	LockValue string  `json:"lock_value,omitempty"`
}

// StoreReply answers a StoreRequest.
type StoreReply struct {
	OK    bool   `json:"ok"`
	N     int64  `json:"n"`
	Time  int64  `json:"time"` // when the store received the request, on the history clock
	Error string `json:"error,omitempty"`
}

// StoreEntry is one line of the store's own log: a request, when it arrived
// and what the store decided.
type StoreEntry struct {
	StoreRequest
	Reply StoreReply `json:"reply"`
}

// Store is the shared resource the locks protect: one counter per lock name,
// served over TCP or a Unix socket. It logs every request it receives, with its
// arrival time, to a JSON-lines file.
type Store struct {
	mode  Mode
	clock history.Clock
	ln    net.Listener
	log   *os.File
	lg    *slog.Logger
	// logBuf holds whole log lines not yet written; Handle writes them out
	// when it fills, the flush loop every logFlushEvery, and Close at the
	// end.
	logBuf []byte
	done   chan struct{}

	mu        sync.Mutex
	counter   map[string]int64
	maxToken  map[string]uint64
	claimant  map[string]string
	conns     map[net.Conn]struct{}
	wg        sync.WaitGroup
	closeOnce sync.Once
}

// StartStore listens on 127.0.0.1 (a free port) and serves until Close.
// logPath receives the store's log; lg may be nil.
func StartStore(mode Mode, clock history.Clock, logPath string, lg *slog.Logger) (*Store, error) {
	return StartStoreOn("127.0.0.1:0", mode, clock, logPath, lg)
}

// UnixStoreAddr is the prefix of a store address that is a Unix socket
// ("unix:/path"); any other address is TCP host:port.
const UnixStoreAddr = "unix:"

// StoreSocket is the name of the store's Unix socket in a run's folder.
const StoreSocket = "store.sock"

// maxSocketPath is the longest path a Unix socket address holds on Linux
// (sun_path, without its terminating NUL).
const maxSocketPath = 107

// StoreAddrIn returns the store address for workers that share the
// driver's network namespace: the Unix socket StoreSocket in dir, or, when
// its path is too long for a socket address, a free loopback TCP port.
func StoreAddrIn(dir string) string {
	if p := filepath.Join(dir, StoreSocket); len(p) <= maxSocketPath {
		return UnixStoreAddr + p
	}
	return "127.0.0.1:0"
}

// storeNetwork splits a store address into its network and address.
func storeNetwork(addr string) (network, a string) {
	if rest, ok := strings.CutPrefix(addr, UnixStoreAddr); ok {
		return "unix", rest
	}
	return "tcp", addr
}

// StartStoreOn is StartStore listening on addr: a TCP host:port, e.g. the
// bridge address of the run's network namespaces so that workers inside
// them can reach it, or a Unix socket (UnixStoreAddr), which costs the
// workers and the driver less per request than loopback TCP where they
// share a network namespace.
func StartStoreOn(addr string, mode Mode, clock history.Clock, logPath string, lg *slog.Logger) (*Store, error) {
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	f, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("resource store log: %w", err)
	}
	ln, err := net.Listen(storeNetwork(addr))
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("resource store: %w", err)
	}
	s := &Store{
		mode: mode, clock: clock, ln: ln, log: f, lg: lg, done: make(chan struct{}),
		counter: map[string]int64{}, maxToken: map[string]uint64{}, claimant: map[string]string{},
		conns: map[net.Conn]struct{}{},
	}
	s.wg.Add(2)
	go s.accept()
	go s.flushLoop()
	return s, nil
}

// logFlushEvery is the longest time a log line waits in the store's
// buffer: a driver killed outright loses at most that much of the log
// (never of the history), and the file always ends with a whole line.
const logFlushEvery = 100 * time.Millisecond

// logBufSize is the size at which Handle writes the buffered lines out.
const logBufSize = 64 << 10

func (s *Store) flushLoop() {
	defer s.wg.Done()
	tick.Every(logFlushEvery, s.done, func() {
		s.mu.Lock()
		s.flushLog()
		s.mu.Unlock()
	})
}

// flushLog writes the buffered log lines. s.mu must be held.
func (s *Store) flushLog() {
	if len(s.logBuf) == 0 {
		return
	}
	if _, err := s.log.Write(s.logBuf); err != nil {
		s.lg.Warn("resource store log", "err", err)
	}
	s.logBuf = s.logBuf[:0]
}

// Addr returns the address workers connect to (DialStore): host:port, or
// UnixStoreAddr and the socket's name.
func (s *Store) Addr() string {
	if s.ln.Addr().Network() == "unix" {
		return UnixStoreAddr + s.ln.Addr().String()
	}
	return s.ln.Addr().String()
}

func (s *Store) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.conns[c] = struct{}{}
		s.mu.Unlock()
		s.wg.Add(1)
		go s.serve(c)
	}
}

func (s *Store) serve(c net.Conn) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		c.Close()
	}()
	r := bufio.NewReader(c)
	var out []byte
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				s.lg.Debug("store connection", "err", err)
			}
			return
		}
		var req StoreRequest
		var rep StoreReply
		if err := decodeRequest(line, &req); err != nil {
			rep = StoreReply{Time: int64(s.clock.Now()), Error: "bad request: " + err.Error()}
		} else {
			rep = s.Handle(req)
		}
		out = append(appendReply(out[:0], rep), '\n')
		if _, err := c.Write(out); err != nil {
			return
		}
	}
}

// Handle applies one request and returns the reply. It is the store's whole
// logic; serve only moves bytes.
func (s *Store) Handle(req StoreRequest) StoreReply {
	s.mu.Lock()
	defer s.mu.Unlock()
	rep := StoreReply{Time: int64(s.clock.Now())}
	switch req.F {
	case history.Read:
		rep.OK, rep.N = true, s.counter[req.Lock]
	case history.Claim:
		s.claimant[req.Lock] = req.LockValue
		rep.OK, rep.N = true, s.counter[req.Lock]
	case history.Write:
		if reason := s.reject(req); reason != "" {
			rep.Error, rep.N = "rejected: "+reason, s.counter[req.Lock]
			break
		}
		s.counter[req.Lock] = req.N
		if req.Token != nil && *req.Token > s.maxToken[req.Lock] {
			s.maxToken[req.Lock] = *req.Token
		}
		rep.OK, rep.N = true, req.N
	default:
		rep.Error = fmt.Sprintf("bad request: unknown f %q", req.F)
	}
	s.logBuf = append(appendEntry(s.logBuf, req, rep), '\n')
	if len(s.logBuf) >= logBufSize {
		s.flushLog()
	}
	return rep
}

// reject says why the mode refuses a write, or "" to accept it.
func (s *Store) reject(req StoreRequest) string {
	switch s.mode {
	case ModeFenced:
		if req.Token == nil {
			return "no fencing token"
		}
		if max := s.maxToken[req.Lock]; *req.Token < max {
			return fmt.Sprintf("token %d < %d", *req.Token, max)
		}
	case ModeCheckAndSet:
		if c := s.claimant[req.Lock]; c != req.LockValue {
			return fmt.Sprintf("claimant is %q, not %q", c, req.LockValue)
		}
	}
	return ""
}

// Close stops serving, closes every connection and the log. It is
// idempotent.
func (s *Store) Close(ctx context.Context) error {
	var err error
	s.closeOnce.Do(func() {
		err = s.ln.Close()
		close(s.done)
		s.mu.Lock()
		for c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
		done := make(chan struct{})
		go func() { s.wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
		}
		s.mu.Lock()
		s.flushLog()
		err = errors.Join(err, s.log.Close())
		s.mu.Unlock()
	})
	return err
}

// StoreClient is a worker's connection to the store. Not safe for
// concurrent use.
type StoreClient struct {
	c   net.Conn
	r   *bufio.Reader
	out []byte
}

// DialStore connects to the store at addr (see Store.Addr).
func DialStore(ctx context.Context, addr string) (*StoreClient, error) {
	var d net.Dialer
	network, a := storeNetwork(addr)
	c, err := d.DialContext(ctx, network, a)
	if err != nil {
		return nil, err
	}
	return &StoreClient{c: c, r: bufio.NewReaderSize(c, 64<<10)}, nil
}

// Do sends req and waits for the reply until ctx's deadline.
func (sc *StoreClient) Do(ctx context.Context, req StoreRequest) (StoreReply, error) {
	if dl, ok := ctx.Deadline(); ok {
		sc.c.SetDeadline(dl)
	} else {
		sc.c.SetDeadline(time.Time{})
	}
	sc.out = append(appendRequest(sc.out[:0], req), '\n')
	if _, err := sc.c.Write(sc.out); err != nil {
		return StoreReply{}, err
	}
	line, err := sc.r.ReadSlice('\n')
	if err != nil {
		return StoreReply{}, err
	}
	var rep StoreReply
	if err := decodeReply(line, &rep); err != nil {
		return StoreReply{}, err
	}
	return rep, nil
}

// Close closes the connection.
func (sc *StoreClient) Close() error { return sc.c.Close() }
