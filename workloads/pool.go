package workloads

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/internal/procfs"
	"github.com/locktest/locktest/internal/tick"
)

// stopPatience bounds Stop when its context has no deadline: a worker that
// has not exited by then is killed.
const stopPatience = 10 * time.Second

// PoolConfig says how to start workers.
type PoolConfig struct {
	// Command is the worker program and its arguments; it must speak the
	// worker protocol on stdin and stdout (`locktest worker`).
	Command []string
	// Env is added to the worker's environment.
	Env []string
	// LogDir receives each worker's stderr as p<process>.log.
	LogDir string
	// Base is the config every worker gets; Process is set per worker.
	Base WorkerConfig
	// Recorder receives every op the workers send.
	Recorder *history.Recorder
	// Clock stamps the ops the pool itself records (a dead worker's info).
	Clock  history.Clock
	Logger *slog.Logger
	// NetNS, if set, names the network namespace (client host) worker
	// process runs in; "" runs it in the driver's. The worker is started
	// through `ip netns exec`, which execs it in place: its pid is its own.
	NetNS func(process int) string
	// Cgroup, if set, names the cgroup v2 directory worker process starts
	// in ("" for the driver's): the client host's own source address on
	// the control host (clusters/clientaddr). The worker is placed there
	// as it is created (CLONE_INTO_CGROUP), so it never opens a
	// connection from outside it.
	Cgroup func(process int) string
	// ReplaceDead, when set, replaces a worker that died by itself (not by
	// Kill, Crash or Stop) with a new process on the same client host, as
	// kill-client's heal does: an external client program that exited.
	ReplaceDead bool
	// Starting, when set, is told of every worker the pool is about to
	// start (the first ones and every replacement), before it can record
	// anything.
	Starting func(process int)
	// RateClock says why the workers' clocks cannot run at a rate
	// (SetClockRate): "" when Command was built with a clock that can
	// (clusters/clockrate), as the run says when it built it so.
	RateClock string
	// SkewClock says why SetWallOffset cannot move the workers' wall
	// clock as their impl reads it: "" when it can.
	SkewClock string
}

// Pool starts and watches worker processes, one per logical client, and
// feeds their ops to the recorder. When a worker dies with an op open, the
// pool completes that op as info, as Jepsen does for a crashed client.
type Pool struct {
	cfg PoolConfig
	lg  *slog.Logger

	mu      sync.Mutex
	workers map[int]*workerProc
	// next is the process id the next replacement worker gets.
	next int
	// host maps a process to the client host (namespace or cgroup) it runs
	// on; a replacement runs on its predecessor's host.
	host map[int]placement
	errs []error
	wg   sync.WaitGroup
	// stopping is set by Stop: no worker starts after it.
	stopping bool
	// pollDone ends the goroutine that reads the workers' event rings.
	pollDone chan struct{}
	stopPoll sync.Once
	pollWG   sync.WaitGroup
}

// ringPoll is how often the pool reads the workers' event rings. An op
// reaches the history at most this late (it keeps the time the worker
// gave it); anything else a worker sends makes the pool read its ring
// first, so the ops before it are recorded before it is handled.
const ringPoll = 2 * time.Millisecond

// placement is where a worker runs: its client host's network namespace
// or cgroup, each "" for the driver's.
type placement struct{ ns, cgroup string }

type workerProc struct {
	process int
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	inMu    sync.Mutex
	points  chan string
	ready   chan error
	exited  chan struct{}
	// killed is set when the pool itself kills the worker.
	killed atomic.Bool
	// wasReady is set once the worker reported ready.
	wasReady atomic.Bool

	// recMu orders what the worker sends: its ring's ops and its stdout
	// events are recorded and handled under it, the ring's first.
	recMu sync.Mutex
	// ring is the worker's event ring; nil once the worker was reaped
	// (or when the ring could not be made: then ops come on stdout).
	ring *eventRing
	ops  *history.OpParser
	op   history.Op
	// ringOps and stdoutOps count the ops that came each way.
	ringOps, stdoutOps int
}

// StartPool starts n workers with process ids 0..n-1 and returns once each
// reported ready. If one cannot start, every worker is stopped and the
// error says which and why.
func StartPool(ctx context.Context, cfg PoolConfig, n int) (*Pool, error) {
	if len(cfg.Command) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return nil, err
		}
		cfg.Command = []string{exe, "worker"}
	}
	lg := cfg.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	p := &Pool{cfg: cfg, lg: lg, workers: map[int]*workerProc{}, next: n, host: map[int]placement{}, pollDone: make(chan struct{})}
	p.pollWG.Go(p.poll)
	var starting []*workerProc
	for i := 0; i < n; i++ {
		if cfg.NetNS != nil {
			p.host[i] = placement{ns: cfg.NetNS(i)}
		}
		if cfg.Cgroup != nil {
			pl := p.host[i]
			pl.cgroup = cfg.Cgroup(i)
			p.host[i] = pl
		}
		w, err := p.start(i)
		if err != nil {
			p.Stop(ctx)
			return nil, err
		}
		starting = append(starting, w)
	}
	for _, w := range starting {
		select {
		case err := <-w.ready:
			if err != nil {
				p.Stop(ctx)
				return nil, fmt.Errorf("worker p%d: %w", w.process, err)
			}
		case <-ctx.Done():
			p.Stop(context.Background()) // bounded by stopPatience
			return nil, ctx.Err()
		}
	}
	return p, nil
}

func (p *Pool) start(process int) (*workerProc, error) {
	if p.cfg.Starting != nil {
		p.cfg.Starting(process)
	}
	argv := p.cfg.Command
	p.mu.Lock()
	host := p.host[process]
	p.mu.Unlock()
	if host.ns != "" {
		argv = append([]string{"ip", "netns", "exec", host.ns}, argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), p.cfg.Env...)
	// A worker gets its own process group, so a terminal's Ctrl-C reaches only
	// the driver, which then stops it in order; Pdeathsig kills it if the
	// driver dies without doing so.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if host.cgroup != "" {
		fd, err := syscall.Open(host.cgroup, syscall.O_DIRECTORY|syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("worker p%d: its client host's cgroup: %w", process, err)
		}
		defer syscall.Close(fd)
		cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, fd
	}
	logf, err := os.Create(filepath.Join(p.cfg.LogDir, fmt.Sprintf("p%d.log", process)))
	if err != nil {
		return nil, err
	}
	cmd.Stderr = logf
	stdin, err := cmd.StdinPipe()
	if err != nil {
		logf.Close()
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		logf.Close()
		return nil, err
	}
	// Interning shares the few lock names, functions and errors among the
	// ops; a small limit bounds what a worker's reader keeps.
	w := &workerProc{process: process, cmd: cmd, stdin: stdin, ops: history.NewOpParser(64),
		points: make(chan string, 1), ready: make(chan error, 1), exited: make(chan struct{})}
	ring, rerr := newEventRing(process)
	if rerr != nil {
		// Not fatal: the worker sends its ops on stdout, as it would
		// without the driver's offer.
		p.lg.Warn("worker ops go through stdout", "process", process, "err", rerr)
	} else {
		w.ring = ring
		cmd.ExtraFiles = []*os.File{ring.file}
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		w.closeRing()
		return nil, fmt.Errorf("start worker %q: %w", p.cfg.Command[0], err)
	}
	p.mu.Lock()
	if p.stopping {
		p.mu.Unlock()
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		logf.Close()
		w.closeRing()
		return nil, errors.New("the pool is stopping")
	}
	p.workers[process] = w
	p.mu.Unlock()
	p.lg.Info("worker started", "process", process, "pid", cmd.Process.Pid)

	cfg := p.cfg.Base
	cfg.Process = process
	if w.ring != nil {
		cfg.EventRing = ringFD
	}
	if err := w.send(Command{Cmd: "start", Config: &cfg}); err != nil {
		p.lg.Warn("worker start command", "process", process, "err", err)
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		p.read(w, stdout)
		err := cmd.Wait()
		logf.Close()
		// What the worker published before it died is recorded before
		// its open op is completed.
		w.recMu.Lock()
		p.drain(w)
		w.closeRing()
		ringOps, stdoutOps := w.ringOps, w.stdoutOps
		w.recMu.Unlock()
		p.closeOpen(w.process, err)
		// Whatever the worker started in its group goes with it.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		close(w.exited)
		p.lg.Info("worker exited", "process", process, "pid", cmd.Process.Pid, "status", fmt.Sprint(err),
			"ops_by_ring", ringOps, "ops_by_stdout", stdoutOps)
		if p.cfg.ReplaceDead && !w.killed.Load() && w.wasReady.Load() {
			p.replaceDead(process)
		}
	}()
	return w, nil
}

func (w *workerProc) send(c Command) error {
	w.inMu.Lock()
	defer w.inMu.Unlock()
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	_, err = w.stdin.Write(append(b, '\n'))
	return err
}

// read consumes a worker's events until its stdout closes.
func (p *Pool) read(w *workerProc, stdout io.Reader) {
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	readySent := false
	signalReady := func(err error) {
		if !readySent {
			readySent = true
			w.ready <- err
		}
	}
	defer signalReady(errors.New("exited before it was ready (see its log)"))
	for sc.Scan() {
		w.recMu.Lock()
		p.drain(w)
		e, ok := p.event(w, sc.Bytes())
		if ok && e.Op != nil {
			w.stdoutOps++
		}
		w.recMu.Unlock()
		if !ok {
			continue
		}
		switch {
		case e.Point != "":
			select {
			case w.points <- e.Point:
			default:
				p.fail(fmt.Errorf("worker p%d reported point %s twice", w.process, e.Point))
			}
		case e.Ready:
			w.wasReady.Store(true)
			signalReady(nil)
		case e.Fatal != "":
			signalReady(errors.New(e.Fatal))
		}
	}
}

// event decodes one line of w, the JSON of an Event, and records it if
// it is an op. It reports whether the line was an event; a bad line is a
// protocol error of the pool. w.recMu must be held.
func (p *Pool) event(w *workerProc, line []byte) (e Event, ok bool) {
	if fastOp(w.ops, line, &w.op) {
		e.Op = &w.op
	} else if err := json.Unmarshal(line, &e); err != nil {
		p.fail(fmt.Errorf("worker p%d sent a bad event: %v: %q", w.process, err, line))
		return e, false
	}
	if e.Op == nil {
		return e, true
	}
	if e.Op.Process != w.process {
		p.fail(fmt.Errorf("worker p%d sent an op of process %d", w.process, e.Op.Process))
		return e, false
	}
	if _, err := p.cfg.Recorder.Record(*e.Op); err != nil {
		p.fail(fmt.Errorf("worker p%d: %w", w.process, err))
	}
	return e, true
}

// drain records the ops w published in its ring since the last drain.
// w.recMu must be held.
func (p *Pool) drain(w *workerProc) {
	if w.ring == nil {
		return
	}
	n, err := w.ring.read(func(line []byte) {
		if e, ok := p.event(w, line); ok && e.Op == nil {
			p.fail(fmt.Errorf("worker p%d sent a non-op event through its ring: %q", w.process, line))
		}
	})
	w.ringOps += n
	if err != nil {
		p.fail(fmt.Errorf("worker p%d: %w", w.process, err))
		w.closeRing() // what it holds cannot be trusted; later ops come on stdout or not at all
	}
}

// poll drains every worker's ring each ringPoll until Stop.
func (p *Pool) poll() {
	var ws []*workerProc
	tick.Every(ringPoll, p.pollDone, func() {
		p.mu.Lock()
		ws = ws[:0]
		for _, w := range p.workers {
			ws = append(ws, w)
		}
		p.mu.Unlock()
		for _, w := range ws {
			w.recMu.Lock()
			p.drain(w)
			w.recMu.Unlock()
		}
	})
}

// closeRing unmaps w's ring; w.recMu must be held once w's reader runs.
func (w *workerProc) closeRing() {
	if w.ring != nil {
		_ = w.ring.close()
		w.ring = nil
	}
}

// fastOp decodes an op event in the form the worker writes it (sendOp)
// into op, and reports whether it could.
func fastOp(p *history.OpParser, line []byte, op *history.Op) bool {
	if !bytes.HasPrefix(line, []byte(eventOpPrefix)) || len(line) < len(eventOpPrefix)+2 || line[len(line)-1] != '}' {
		return false
	}
	*op = history.Op{}
	return p.Parse(line[len(eventOpPrefix):len(line)-1], op)
}

// closeOpen completes a dead worker's open op as info: it may have taken
// effect.
func (p *Pool) closeOpen(process int, exitErr error) {
	inv, ok := p.cfg.Recorder.Open(process)
	if !ok {
		return
	}
	msg := "worker exited"
	if exitErr != nil {
		msg += ": " + exitErr.Error()
	}
	_, err := p.cfg.Recorder.Record(history.Op{Type: history.Info, Process: process, F: inv.F,
		Time: int64(p.cfg.Clock.Now()), Value: inv.Value, Error: msg})
	if err != nil {
		p.fail(err)
	}
}

func (p *Pool) fail(err error) {
	p.lg.Error("worker protocol", "err", err)
	p.mu.Lock()
	p.errs = append(p.errs, err)
	p.mu.Unlock()
}

// Errs returns the protocol errors seen so far (a non-empty list is a bug in
// a worker or in the pool, and makes the run's history suspect).
func (p *Pool) Errs() []error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]error(nil), p.errs...)
}

func (p *Pool) worker(process int) (*workerProc, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	w, ok := p.workers[process]
	if !ok {
		return nil, fmt.Errorf("no worker p%d", process)
	}
	return w, nil
}

// liveWorker returns the worker of process, or an error when there is
// none or it has exited.
func (p *Pool) liveWorker(process int) (*workerProc, error) {
	w, err := p.worker(process)
	if err != nil {
		return nil, err
	}
	select {
	case <-w.exited:
		return nil, fmt.Errorf("worker p%d has exited", process)
	default:
		return w, nil
	}
}

// Processes returns the process ids of the workers still running, in order.
func (p *Pool) Processes() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]int, 0, len(p.workers))
	for id, w := range p.workers {
		select {
		case <-w.exited:
		default:
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// Arm makes the worker stop at point the next time it passes it and report.
// A report left over from an earlier arm that was given up is dropped.
func (p *Pool) Arm(process int, point string) error {
	w, err := p.worker(process)
	if err != nil {
		return err
	}
	select {
	case <-w.points:
	default:
	}
	return w.send(Command{Cmd: "arm", Point: point})
}

// Disarm gives up an Arm whose point was not awaited: a worker that has
// not reached the point forgets it, one that has goes on.
func (p *Pool) Disarm(process int) error {
	w, err := p.worker(process)
	if err != nil {
		return err
	}
	return w.send(Command{Cmd: "disarm"})
}

// WaitPoint waits until the worker reports an armed pause point; the
// worker then waits for Continue.
func (p *Pool) WaitPoint(ctx context.Context, process int) (string, error) {
	w, err := p.worker(process)
	if err != nil {
		return "", err
	}
	select {
	case pt := <-w.points:
		return pt, nil
	case <-w.exited:
		return "", fmt.Errorf("worker p%d exited", process)
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// Continue lets a worker waiting at a pause point go on.
func (p *Pool) Continue(process int) error {
	w, err := p.worker(process)
	if err != nil {
		return err
	}
	return w.send(Command{Cmd: "continue"})
}

// SetWallOffset skews the worker's wall clock by d.
func (p *Pool) SetWallOffset(process int, d time.Duration) error {
	w, err := p.worker(process)
	if err != nil {
		return err
	}
	return w.send(Command{Cmd: "wall-offset", Offset: Duration(d)})
}

// WallOffsetReason says why SetWallOffset cannot move the clock the
// workers' impl reads: "" when it can (PoolConfig.SkewClock).
func (p *Pool) WallOffsetReason() string { return p.cfg.SkewClock }

// ClockRateReason says why SetClockRate cannot work: "" when the workers
// were built with a clock that runs at a rate (PoolConfig.RateClock).
func (p *Pool) ClockRateReason() string { return p.cfg.RateClock }

// SetClockRate makes the worker's Go runtime clock, the one its library
// measures durations and timers with, run at factor times the real rate
// (1: the real rate again), in workers built for it (ClockRateReason).
func (p *Pool) SetClockRate(process int, factor float64) error {
	if p.cfg.RateClock != "" {
		return errors.New(p.cfg.RateClock)
	}
	w, err := p.worker(process)
	if err != nil {
		return err
	}
	return w.send(Command{Cmd: "clock-rate", Rate: factor})
}

// replaceDead starts the replacement of a worker that died by itself,
// unless the pool is stopping; a failure is a protocol error of the pool.
func (p *Pool) replaceDead(process int) {
	p.mu.Lock()
	stopping := p.stopping
	p.mu.Unlock()
	if stopping {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	np, err := p.Replace(ctx, process)
	if err != nil {
		p.mu.Lock()
		stopping = p.stopping
		p.mu.Unlock()
		if !stopping {
			p.fail(fmt.Errorf("replace dead worker p%d: %w", process, err))
		}
		return
	}
	p.lg.Info("dead worker replaced", "process", process, "new", np)
}

// Signal sends sig to the worker's process group: the worker and any
// client program it runs. For SIGSTOP it returns once every thread of
// every process of the group is stopped.
func (p *Pool) Signal(process int, sig syscall.Signal) error {
	w, err := p.liveWorker(process)
	if err != nil {
		return err
	}
	if err := syscall.Kill(-w.cmd.Process.Pid, sig); err != nil {
		return err
	}
	if sig == syscall.SIGSTOP {
		// The kernel stops a process asynchronously; the pause counts only
		// once every thread is stopped.
		return procfs.WaitGroupStopped(w.cmd.Process.Pid, time.Second)
	}
	return nil
}

// Crash kills the worker of process with SIGKILL, as a crashed client
// host would lose it, and starts a replacement on the same client host with
// a new process id, as Jepsen does: the dead process's open op is completed
// as info and the process never records again. It returns the new process
// id once the replacement reported ready.
func (p *Pool) Crash(ctx context.Context, process int) (int, error) {
	if err := p.Kill(ctx, process); err != nil {
		return 0, err
	}
	return p.Replace(ctx, process)
}

// Kill SIGKILLs the worker of process and returns once it has been reaped
// and its open op completed as info.
func (p *Pool) Kill(ctx context.Context, process int) error {
	w, err := p.liveWorker(process)
	if err != nil {
		return err
	}
	w.killed.Store(true)
	if err := syscall.Kill(-w.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill p%d: %w", process, err)
	}
	// SIGKILL was sent: the process is dead or dies now, whatever ctx says;
	// wait for the reaper, so its open op is completed before we return.
	<-w.exited
	return nil
}

// Replace starts a worker with a new process id on the client host of the
// dead process, and returns the new id once the worker reported ready.
func (p *Pool) Replace(ctx context.Context, process int) (int, error) {
	w, err := p.worker(process)
	if err != nil {
		return 0, err
	}
	select {
	case <-w.exited:
	default:
		return 0, fmt.Errorf("worker p%d is still running", process)
	}
	p.mu.Lock()
	np := p.next
	p.next++
	p.host[np] = p.host[process]
	p.mu.Unlock()
	nw, err := p.start(np)
	if err != nil {
		return 0, fmt.Errorf("replace p%d: %w", process, err)
	}
	select {
	case err := <-nw.ready:
		if err != nil {
			return np, fmt.Errorf("replacement p%d of p%d: %w", np, process, err)
		}
	case <-ctx.Done():
		return np, ctx.Err()
	}
	return np, nil
}

// OpPaths returns how many ops the workers sent through their event rings
// and how many through stdout, so far: stdout carries ops only from a
// worker whose ring could not be made or ran full.
func (p *Pool) OpPaths() (ring, stdout int) {
	p.mu.Lock()
	ws := make([]*workerProc, 0, len(p.workers))
	for _, w := range p.workers {
		ws = append(ws, w)
	}
	p.mu.Unlock()
	for _, w := range ws {
		w.recMu.Lock()
		ring, stdout = ring+w.ringOps, stdout+w.stdoutOps
		w.recMu.Unlock()
	}
	return ring, stdout
}

// Pid returns the OS pid of the worker of process.
func (p *Pool) Pid(process int) (int, error) {
	w, err := p.worker(process)
	if err != nil {
		return 0, err
	}
	return w.cmd.Process.Pid, nil
}

// Stop asks every worker to finish its critical section and exit, waits
// until ctx is done for them, then kills the rest (resuming stopped ones
// first) and waits until every worker process is reaped. Ops still open are
// completed as info. It is idempotent.
func (p *Pool) Stop(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, stopPatience)
		defer cancel()
	}
	p.mu.Lock()
	p.stopping = true
	ws := make([]*workerProc, 0, len(p.workers))
	for _, w := range p.workers {
		ws = append(ws, w)
	}
	p.mu.Unlock()
	for _, w := range ws {
		w.killed.Store(true) // it exits now on purpose: no replacement
		_ = w.send(Command{Cmd: "stop"})
		_ = syscall.Kill(-w.cmd.Process.Pid, syscall.SIGCONT)
		_ = w.send(Command{Cmd: "continue"})
	}
	for _, w := range ws {
		select {
		case <-w.exited:
		case <-ctx.Done():
			_ = syscall.Kill(-w.cmd.Process.Pid, syscall.SIGKILL)
			<-w.exited
		}
	}
	for _, w := range ws {
		w.stdin.Close()
	}
	p.wg.Wait()
	p.stopPoll.Do(func() { close(p.pollDone) })
	p.pollWG.Wait()
	return errors.Join(p.Errs()...)
}
