package workloads

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"time"

	"github.com/locktest/locktest/clusters/clockrate/rate"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/impls"
	"github.com/locktest/locktest/impls/external"
)

// RunWorker is the body of the hidden `locktest worker` command: it reads
// commands from in, sends events to out, and runs one logical client's loop
// until stopped, until in closes, or until ctx is done. It returns an error
// only when it could not start; the error was also sent as a Fatal event.
func RunWorker(ctx context.Context, in io.Reader, out io.Writer) error {
	w := &worker{out: json.NewEncoder(out), raw: out, cont: make(chan struct{}, 1), toldC: make(chan struct{}, 1)}
	cmds := bufio.NewScanner(in)
	cmds.Buffer(make([]byte, 1<<20), 1<<20)
	if !cmds.Scan() {
		return w.fatal(errors.New("no start command on stdin"))
	}
	var start Command
	if err := json.Unmarshal(cmds.Bytes(), &start); err != nil || start.Cmd != "start" || start.Config == nil {
		return w.fatal(fmt.Errorf("first command must be start with a config: %q", cmds.Text()))
	}
	w.cfg = *start.Config
	if w.cfg.ProfileDir != "" {
		stop, err := startCPUProfile(filepath.Join(w.cfg.ProfileDir, fmt.Sprintf("worker-p%d.cpu.pprof", w.cfg.Process)))
		if err != nil {
			return w.fatal(err)
		}
		defer stop()
	}
	w.clock = history.ClockAt(w.cfg.ClockOrigin)
	if w.cfg.EventRing > 0 {
		r, err := openEventRing(w.cfg.EventRing)
		if err != nil {
			return w.fatal(err)
		}
		w.ring = r
	}
	w.rng = rand.New(rand.NewPCG(uint64(w.cfg.Seed), uint64(w.cfg.Process)))

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w.ctx = ctx
	go func() {
		defer cancel() // stdin closed: the driver is gone
		for cmds.Scan() {
			var c Command
			if err := json.Unmarshal(cmds.Bytes(), &c); err != nil {
				continue
			}
			switch c.Cmd {
			case "stop":
				w.stopping.Store(true)
			case "arm":
				w.armed.Store(&c.Point)
			case "disarm":
				// Not reached yet: forget the point. Reached: the worker
				// waits (or is about to) at it; let it go on.
				if p := w.armed.Load(); p == nil || !w.armed.CompareAndSwap(p, nil) {
					select {
					case w.cont <- struct{}{}:
					default:
					}
				}
			case "continue":
				select {
				case w.cont <- struct{}{}:
				default:
				}
			case "wall-offset":
				// The whole process's wall clock where the runtime can
				// move it; else the impl's.
				if rate.SetWall(time.Duration(c.Offset)) != nil {
					w.wallOffset.Store(int64(c.Offset))
				}
			case "clock-rate":
				if err := rate.Set(c.Rate); err != nil {
					fmt.Fprintf(os.Stderr, "clock-rate %v: %v\n", c.Rate, err)
				}
			}
		}
	}()

	client, err := w.newClient(ctx)
	if err != nil {
		return w.fatal(fmt.Errorf("impl %s: %w", w.cfg.Impl, err))
	}
	defer client.Close()
	w.client = client
	if w.cfg.Mode == ModeEtcdGuarded {
		gw, ok := client.(impls.GuardedWriter)
		if !ok {
			return w.fatal(fmt.Errorf("resource mode %s: impl %s cannot guard writes inside its lock service", w.cfg.Mode, w.cfg.Impl))
		}
		w.guarded = gw
	}
	if err := w.dialStoreAtStart(ctx); err != nil {
		return w.fatal(fmt.Errorf("resource store: %w", err))
	}
	defer w.closeStore()
	w.send(Event{Ready: true})
	w.loop(ctx)
	w.flush()
	if w.dead != nil {
		// The client died with an op open: exit without completing it, so
		// that the pool completes it as "worker exited", the proof of this
		// process's death.
		fmt.Fprintf(os.Stderr, "%s worker p%d: %v\n", time.Now().UTC().Format(time.RFC3339Nano), w.cfg.Process, w.dead)
		return w.dead
	}
	return nil
}

// newClient builds the worker's client: the external program of
// cfg.Client, or the Go impl cfg.Impl names.
func (w *worker) newClient(ctx context.Context) (impls.Client, error) {
	c := impls.Config{
		Addrs: w.cfg.Addrs, Nodes: w.cfg.Nodes, Params: w.cfg.Params, Process: w.cfg.Process, Now: w.clock.Now, Wall: w.wall,
		Hook: w.pausePoint, Lost: w.lost,
	}
	if w.cfg.Client != nil {
		return external.New(ctx, *w.cfg.Client, c, external.Run{Locks: w.cfg.Locks, TTL: time.Duration(w.cfg.TTL), Deadline: time.Duration(w.cfg.Timeout)}, os.Stderr)
	}
	impl, err := impls.Lookup(w.cfg.Impl)
	if err != nil {
		return nil, err
	}
	return impl.New(ctx, c)
}

type worker struct {
	ctx    context.Context // done when the driver is gone
	cfg    WorkerConfig
	clock  history.Clock
	rng    *rand.Rand
	client impls.Client
	store  *StoreClient
	// guarded is the client's GuardedWriter in mode etcd-guarded, where the
	// resource lives in the lock service; nil otherwise.
	guarded impls.GuardedWriter

	outMu    sync.Mutex
	out      *json.Encoder
	raw      io.Writer  // what out writes to
	line     []byte     // op events held back (sendOp)
	ring     *eventRing // where op events go, when the driver gave one
	cont     chan struct{}
	stopping atomic.Bool
	// dead is the error of a client that died (impls.ErrDead): the loop
	// ends, and the worker exits with the op it was in left open.
	dead       error
	armed      atomic.Pointer[string]
	wallOffset atomic.Int64

	// unreleased are the leases whose release came back of unknown
	// outcome, to try again (WorkerConfig.RetryRelease), oldest first.
	unreleased []unreleased

	// noticeMu guards what the lost-lock notices act on: the lease held
	// now (holding, heldLock, heldValue) and whether its holder was told
	// it is lost (told, also signalled on toldC for a wait to end).
	noticeMu  sync.Mutex
	holding   bool
	heldLock  string
	heldValue string
	told      bool
	toldC     chan struct{}
}

// unreleased is a lease whose release is to be tried again, and when the
// next try is due.
type unreleased struct {
	lease impls.Lease
	due   time.Time
}

// lost is the impls.Config.Lost of the worker's client: it records the
// notice (history.Notice, f lost) at once, and when it concerns the lease
// held now (the same lock and value, or the client named none), marks
// that lease told. It may be called from any goroutine.
func (w *worker) lost(lock, value, reason string) {
	w.noticeMu.Lock()
	defer w.noticeMu.Unlock()
	w.record(history.Op{Type: history.Notice, F: history.Lost, Value: history.Value{Lock: lock, LockValue: value}, Error: reason})
	if !w.holding || (lock != "" && lock != w.heldLock) || (value != "" && value != w.heldValue) || w.told {
		return
	}
	w.told = true
	select {
	case w.toldC <- struct{}{}:
	default:
	}
}

// hold records that l is held from now on, not yet told lost; a zero l
// records that nothing is held.
func (w *worker) hold(l impls.Lease, held bool) {
	w.noticeMu.Lock()
	defer w.noticeMu.Unlock()
	w.holding, w.heldLock, w.heldValue, w.told = held, l.Lock, l.Value, false
	select {
	case <-w.toldC: // a signal of an earlier lease
	default:
	}
}

// invoke records the invocation of the resource op f on v, unless the
// holder stops writing (--on-lost stop-writing, and its lease was told
// lost): then it records nothing and reports false. The check and the
// record are one step, so that no notice comes between them.
func (w *worker) invoke(f string, v history.Value) bool {
	if w.cfg.OnLost == OnLostStopWriting {
		w.noticeMu.Lock()
		defer w.noticeMu.Unlock()
		if w.told {
			return false
		}
	}
	w.record(history.Op{Type: history.Invoke, F: f, Value: v})
	return true
}

func (w *worker) wall() time.Time { return time.Now().Add(time.Duration(w.wallOffset.Load())) }

// send sends e after the op events still held back.
func (w *worker) send(e Event) {
	w.outMu.Lock()
	defer w.outMu.Unlock()
	w.flushLocked()
	_ = w.out.Encode(e) // a broken pipe means the driver is gone; ctx ends the loop
}

func (w *worker) fatal(err error) error {
	w.send(Event{Fatal: err.Error()})
	return err
}

// pausePoint stops at point if the driver armed it: it reports the point and
// waits for continue. The driver SIGSTOPs the process while it waits.
func (w *worker) pausePoint(point string) {
	p := w.armed.Load()
	if p == nil || *p != point || !w.armed.CompareAndSwap(p, nil) {
		return
	}
	w.send(Event{Point: point})
	select {
	case <-w.cont:
	case <-w.ctx.Done():
	}
}

// record sends op as this process's, timed now unless it has a time. The
// time is read under the lock that orders the sends, so that a notice
// recorded on another goroutine never goes out after a later op.
func (w *worker) record(op history.Op) {
	op.Process = w.cfg.Process
	w.sendOp(op)
}

// sendOp sends Event{Op: &op}, encoded as encoding/json would, through
// the event ring when there is one: the driver reads it without being
// woken, and it keeps what was published if this process is killed. A
// full ring makes stdout the way of this op and all later ones. On
// stdout, an invocation is written at once, together with the completions held back
// before it, since the request it announces is about to leave this
// process, and so is a notice, which may come while the loop waits; a
// completion is held back until the next write, so that a critical
// section costs the driver one wake-up per request rather than
// two. Nothing is held back across a wait (sleepFor, a pause point) or
// the end of the loop, and a worker killed with a completion held back
// leaves that op open, which the pool completes as info: sound, as every
// completion a dead process could not report.
func (w *worker) sendOp(op history.Op) {
	w.outMu.Lock()
	defer w.outMu.Unlock()
	if op.Time == 0 {
		op.Time = int64(w.clock.Now())
	}
	w.line = append(history.AppendJSON(append(w.line, eventOpPrefix...), op), '}', '\n')
	if w.ring != nil {
		if w.ring.write(w.line) {
			w.line = w.line[:0]
			return
		}
		// The driver has not kept up. From now on every op goes to
		// stdout: the driver reads the ring before each stdout line, so
		// the order holds, which writing to the ring again once it has
		// room would break.
		fmt.Fprintf(os.Stderr, "worker p%d: event ring full; op events go to stdout from now on\n", w.cfg.Process)
		w.ring = nil
		w.flushLocked()
		return
	}
	if op.Type == history.Invoke || op.Type == history.Notice {
		w.flushLocked()
	}
}

// flush writes the op events held back.
func (w *worker) flush() {
	w.outMu.Lock()
	defer w.outMu.Unlock()
	w.flushLocked()
}

// flushLocked is flush with w.outMu held.
func (w *worker) flushLocked() {
	if len(w.line) > 0 {
		_, _ = w.raw.Write(w.line) // a broken pipe means the driver is gone; ctx ends the loop
		w.line = w.line[:0]
	}
}

func (w *worker) opCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, time.Duration(w.cfg.Timeout))
}

func (w *worker) sleep(ctx context.Context, max Duration) { w.sleepBetween(ctx, 0, max) }

// sleepBetween sleeps a time uniform in [lo, hi] (lo when hi < lo), or
// until ctx is done.
func (w *worker) sleepBetween(ctx context.Context, lo, hi Duration) {
	if hi <= 0 && lo <= 0 {
		return
	}
	d := time.Duration(max(lo, 0))
	if hi > lo {
		d += time.Duration(w.rng.Int64N(int64(hi-lo) + 1))
	}
	w.sleepFor(ctx, d)
}

// sleepFor sleeps d, or until ctx is done.
func (w *worker) sleepFor(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	w.flush()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// loop runs the worker's critical sections until ctx ends or the driver
// stops it: acquire (tried again at once, up to RetryAcquire times, while
// its outcome is unknown), the releases to try again (RetryRelease), the
// critical section, release, think.
func (w *worker) loop(ctx context.Context) {
	failed := 0 // failed acquires in a row
	for ctx.Err() == nil && !w.stopping.Load() {
		lock := w.cfg.Locks[w.rng.IntN(len(w.cfg.Locks))]
		lease, typ := w.acquireRetrying(ctx, lock)
		if w.dead != nil {
			return
		}
		if typ != history.OK {
			failed++
			w.sleepFor(ctx, w.cfg.Backoff.Wait(failed, w.rng.Float64()))
			continue
		}
		failed = 0
		w.hold(lease, true)
		w.pausePoint(PointAfterAcquire)
		w.retryReleases(ctx)
		if w.dead != nil {
			return
		}
		w.critical(ctx, lease)
		w.release(ctx, lease)
		w.hold(impls.Lease{}, false)
		if w.dead != nil {
			return
		}
		w.sleep(ctx, w.cfg.Think)
	}
}

// acquireRetrying acquires lock, and tries again at once, up to
// RetryAcquire times, while the acquire's outcome is unknown (info); it
// returns the last try's lease and completion's type (see acquire).
func (w *worker) acquireRetrying(ctx context.Context, lock string) (impls.Lease, history.Type) {
	lease, typ := w.acquire(ctx, lock)
	for try := 0; typ == history.Info && try < w.cfg.RetryAcquire && ctx.Err() == nil && !w.stopping.Load(); try++ {
		lease, typ = w.acquire(ctx, lock)
	}
	return lease, typ
}

// acquire records one acquire of lock and returns its lease and its
// completion's type; "" when the client died (w.dead), the op left open.
func (w *worker) acquire(ctx context.Context, lock string) (impls.Lease, history.Type) {
	w.record(history.Op{Type: history.Invoke, F: history.Acquire, Value: history.Value{Lock: lock}})
	octx, cancel := w.opCtx(ctx)
	lease, err := w.client.Acquire(octx, lock, time.Duration(w.cfg.TTL))
	cancel()
	if errors.Is(err, impls.ErrDead) {
		w.dead = err
		return impls.Lease{}, ""
	}
	done := history.Op{F: history.Acquire, Value: history.Value{Lock: lock}}
	if err == nil {
		done.Value = leaseValue(lease)
	}
	complete(&done, err, impls.ErrNotAcquired)
	w.record(done)
	return lease, done.Type
}

// complete sets the type and error of done, the completion of a client op
// that returned err: ok without an error; fail when the op was not sent
// (its error then starts with history.NotSent) or when err is refused, the
// client's refusal that leaves the lock service as it was; info, the
// outcome unknown, for any other error.
func complete(done *history.Op, err, refused error) {
	switch {
	case err == nil:
		done.Type = history.OK
	case notSent(err):
		done.Type, done.Error = history.Fail, history.NotSent+err.Error()
	case errors.Is(err, refused):
		done.Type, done.Error = history.Fail, err.Error()
	default:
		done.Type, done.Error = history.Info, err.Error()
	}
}

func leaseValue(l impls.Lease) history.Value {
	v := history.Value{Lock: l.Lock, LockValue: l.Value, ValidUntil: int64(l.ValidUntil), Node: l.Node}
	if l.HasToken {
		v.Token = history.Tok(l.Token)
	}
	return v
}

// leaseRef is what the ops of a critical section carry of its lease: lock,
// token and lock value, without the holder's belief or the node.
func leaseRef(l impls.Lease) history.Value {
	v := leaseValue(l)
	v.ValidUntil, v.Node = 0, ""
	return v
}

// critical runs the critical section: claim (check-and-set mode), read,
// optional work, write value+1 with the lease's token and value.
// With --on-lost stop-writing, a holder told that its lease is lost does
// none of these steps from then on (invoke), and its work ends at the
// notice.
func (w *worker) critical(ctx context.Context, l impls.Lease) {
	base := leaseRef(l)
	if w.cfg.Mode == ModeCheckAndSet {
		if _, ok := w.storeOp(ctx, history.Claim, base); !ok {
			return
		}
	}
	read := history.Value{Lock: l.Lock}
	n, ok := w.resourceOp(ctx, history.Read, read, l)
	if !ok {
		return
	}
	w.work(ctx)
	w.pausePoint(PointBeforeWrite)
	base.N = history.Num(n + 1)
	w.resourceOp(ctx, history.Write, base, l)
}

// work spends the time between the read and the write (uniform in
// [WorkMin, Work]); with --on-lost stop-writing, a notice of the lease's
// loss ends it.
func (w *worker) work(ctx context.Context) {
	if w.cfg.OnLost != OnLostStopWriting {
		w.sleepBetween(ctx, w.cfg.WorkMin, w.cfg.Work)
		return
	}
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-w.toldC:
			cancel()
		case <-lctx.Done():
		}
	}()
	w.sleepBetween(lctx, w.cfg.WorkMin, w.cfg.Work)
}

// resourceOp reads or writes the resource: through the lock service in mode
// etcd-guarded, else through the store.
func (w *worker) resourceOp(ctx context.Context, f string, v history.Value, l impls.Lease) (int64, bool) {
	if w.guarded != nil {
		return w.guardedOp(ctx, f, v, l)
	}
	return w.storeOp(ctx, f, v)
}

// guardedOp records one read or write of the resource kept in the lock
// service (mode etcd-guarded). A write the lock service refused because the
// lease no longer owns its lock is a fail whose error starts with
// "rejected", as a store's refusal is; a write whose outcome is unknown is
// info; a read that failed is a fail.
func (w *worker) guardedOp(ctx context.Context, f string, v history.Value, l impls.Lease) (int64, bool) {
	if !w.invoke(f, v) {
		return 0, false
	}
	octx, cancel := w.opCtx(ctx)
	var n int64
	var err error
	accepted := true
	if f == history.Write && v.N != nil {
		n = *v.N
		accepted, err = w.guarded.GuardedWrite(octx, l, v.Lock, n)
	} else {
		n, err = w.guarded.GuardedRead(octx, l, v.Lock)
	}
	cancel()
	done := history.Op{F: f, Value: v}
	switch {
	case err != nil && f == history.Write && !notSent(err):
		done.Type, done.Error = history.Info, err.Error()
	case err != nil:
		done.Type, done.Error = history.Fail, err.Error()
	case !accepted:
		done.Type, done.Error = history.Fail, "rejected: the lock service refused the write: the lease no longer owns "+l.Lock
	default:
		done.Type = history.OK
		done.Value.N = history.Num(n)
	}
	w.record(done)
	return n, done.Type == history.OK
}

// storeOp records one store request and its outcome. A rejected write is a
// fail (the store changed nothing); a lost connection leaves a write info
// (the store may have applied it) and a read or claim fail.
func (w *worker) storeOp(ctx context.Context, f string, v history.Value) (int64, bool) {
	if !w.invoke(f, v) {
		return 0, false
	}
	req := StoreRequest{F: f, Process: w.cfg.Process, Lock: v.Lock, Token: v.Token, LockValue: v.LockValue}
	if v.N != nil {
		req.N = *v.N
	}
	octx, cancel := w.opCtx(ctx)
	rep, err := w.storeDo(octx, req)
	cancel()
	done := history.Op{F: f, Value: v}
	switch {
	case err != nil && f != history.Read && !notSent(err):
		// A write or claim whose reply was lost may have been applied.
		done.Type, done.Error = history.Info, err.Error()
	case err != nil:
		// A read changes nothing; a request never sent had no effect.
		done.Type, done.Error = history.Fail, err.Error()
	case !rep.OK:
		done.Type, done.Error = history.Fail, rep.Error
		done.Value.StoreTime = rep.Time
	default:
		done.Type = history.OK
		done.Value.StoreTime = rep.Time
		done.Value.N = history.Num(rep.N)
	}
	w.record(done)
	return rep.N, done.Type == history.OK
}

// release releases l, and keeps it to try again when the release came
// back of unknown outcome and RetryRelease is set.
func (w *worker) release(ctx context.Context, l impls.Lease) {
	if w.releaseOp(ctx, l) == history.Info && w.cfg.RetryRelease > 0 {
		w.unreleased = append(w.unreleased, unreleased{l, time.Now().Add(time.Duration(w.cfg.RetryRelease))})
	}
}

// retryReleases tries again, once each, the releases of unknown outcome
// whose next try is due, each with its own lease (the impl's client
// releases it as it released it the first time: with the same lock
// object, where it keeps one). Each try is its own release op. A try
// that completes ok or fail ends the retries of its lease; one of
// unknown outcome is due again RetryRelease later.
func (w *worker) retryReleases(ctx context.Context) {
	kept := w.unreleased[:0]
	for _, u := range w.unreleased {
		if w.dead == nil && !time.Now().Before(u.due) {
			if w.releaseOp(ctx, u.lease) != history.Info {
				continue
			}
			u.due = time.Now().Add(time.Duration(w.cfg.RetryRelease))
		}
		kept = append(kept, u)
	}
	w.unreleased = kept
}

// releaseOp records one release of l and returns its completion's type;
// "" when the client died (w.dead), the op left open.
func (w *worker) releaseOp(ctx context.Context, l impls.Lease) history.Type {
	v := leaseRef(l)
	w.record(history.Op{Type: history.Invoke, F: history.Release, Value: v})
	octx, cancel := w.opCtx(ctx)
	rel, err := w.client.Release(octx, l)
	cancel()
	if errors.Is(err, impls.ErrDead) {
		w.dead = err
		return ""
	}
	done := history.Op{F: history.Release, Value: v}
	if err == nil {
		done.Value.Removed = rel.Removed
	}
	complete(&done, err, impls.ErrNotHeld)
	w.record(done)
	return done.Type
}

func (w *worker) dialStore(ctx context.Context) error {
	octx, cancel := w.opCtx(ctx)
	defer cancel()
	sc, err := DialStore(octx, w.cfg.StoreAddr)
	if err != nil {
		return err
	}
	w.store = sc
	return nil
}

// storeStartTimeout bounds the first connection to the resource store. A
// single dial gets the op timeout, which a loaded machine can exceed on
// loopback; the start of a worker is no op of the history, so it retries.
const storeStartTimeout = 10 * time.Second

// dialStoreAtStart dials the store until it answers or storeStartTimeout
// passed.
func (w *worker) dialStoreAtStart(ctx context.Context) error {
	deadline := time.Now().Add(storeStartTimeout)
	for {
		err := w.dialStore(ctx)
		if err == nil || ctx.Err() != nil || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (w *worker) closeStore() {
	if w.store != nil {
		w.store.Close()
		w.store = nil
	}
}

// storeDo sends one request, redialling first if an earlier request broke
// the connection (a late reply must not be read as the next one's).
func (w *worker) storeDo(ctx context.Context, req StoreRequest) (StoreReply, error) {
	if w.store == nil {
		if err := w.dialStore(ctx); err != nil {
			return StoreReply{}, err
		}
	}
	rep, err := w.store.Do(ctx, req)
	if err != nil {
		w.closeStore()
	}
	return rep, err
}

// notSent reports whether err says the request never left the client: the
// connection could not even be dialled, or the impl marked the error
// impls.ErrNotSent (its connection could not be opened), so the op
// certainly had no effect.
func notSent(err error) bool {
	var oe *net.OpError
	return errors.Is(err, impls.ErrNotSent) || errors.As(err, &oe) && oe.Op == "dial"
}

// startCPUProfile writes a CPU profile of this process to path until the
// returned stop is called.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("profile %s: %w", path, err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}
