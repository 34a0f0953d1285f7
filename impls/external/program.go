package external

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/locktest/locktest/impls"
	"github.com/locktest/locktest/internal/procfs"
)

// Spec says how to start a client program and what to tell it.
type Spec struct {
	// Command is the program and its arguments.
	Command []string `json:"command"`
	// Dir is the directory it runs in; "" is the caller's.
	Dir string `json:"dir,omitempty"`
	// Backend names the lock service it runs against.
	Backend string `json:"backend"`
	// Params are the run's --client-opt settings, passed in hello.
	Params map[string]string `json:"params,omitempty"`
}

// helloTimeout bounds the wait for a program's hello_ok: an interpreter
// that loads its libraries takes a fraction of a second, a JVM a few. A
// starved one takes much longer: under stress-ng, beside the ssh lab's
// containers (each a scheduler group of its own, as large as the whole
// test run's), kazoo's Python adapter did not answer within 30 s, although
// it answers within 0.2 s on an idle machine. The error then says how much
// CPU the program got (helloStall).
const helloTimeout = 60 * time.Second

// program is a started client program.
type program struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	inMu   sync.Mutex
	lines  chan []byte   // its stdout, a line at a time
	exited chan struct{} // closed once it exited and was reaped
	err    error         // its exit status, set before exited closes
	tail   *tail         // the end of its stderr
	// eofAt and reapedAt are when its output closed and when it was
	// reaped (its exit and the end of its stderr), set before exited
	// closes: a death noticed late says where the time went.
	eofAt, reapedAt time.Time
}

// start starts spec's program with its stderr copied to stderr (and kept
// in a tail for errors). With group, the program leads a process group of
// its own, which kill then ends whole; without, it stays in the caller's
// group, so that a signal to the caller's group (a paused or killed
// client) reaches it too. Either way it dies with the caller.
//
// A lost notice the program prints, at any time, goes to lost (when not
// nil) as it is read, never to the lines a request waits for.
func start(spec Spec, stderr io.Writer, group bool, lost func(Reply)) (*program, error) {
	if len(spec.Command) == 0 {
		return nil, errors.New("no client program given")
	}
	cmd := exec.Command(spec.Command[0], spec.Command[1:]...)
	cmd.Dir = spec.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: group, Pdeathsig: syscall.SIGKILL}
	t := &tail{}
	if stderr == nil {
		stderr = io.Discard
	}
	cmd.Stderr = io.MultiWriter(stderr, t)
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("client program %s: %w", spec.Command[0], err)
	}
	p := &program{cmd: cmd, in: in, lines: make(chan []byte, 64), exited: make(chan struct{}), tail: t}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			if r, ok := lostNotice(sc.Bytes()); ok {
				if lost != nil {
					lost(r)
				}
				continue
			}
			p.lines <- bytes.Clone(sc.Bytes())
		}
		_, _ = io.Copy(io.Discard, out) // a line too long: drain the rest
		p.eofAt = time.Now()
		p.err = cmd.Wait()
		p.reapedAt = time.Now()
		close(p.exited)
	}()
	return p, nil
}

// lostNotice reads line as a lost notice, if it is one.
func lostNotice(line []byte) (Reply, bool) {
	if !bytes.Contains(line, []byte(`"`+TypeLost+`"`)) {
		return Reply{}, false
	}
	var r Reply
	if json.Unmarshal(line, &r) != nil || r.Type != TypeLost {
		return Reply{}, false
	}
	return r, true
}

// send writes one message as a line.
func (p *program) send(msg any) error {
	b, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	p.inMu.Lock()
	defer p.inMu.Unlock()
	_, err = p.in.Write(append(b, '\n'))
	return err
}

// next returns the program's next line, or an error when it exited or
// ctx ended first.
func (p *program) next(ctx context.Context) ([]byte, error) {
	select {
	case l := <-p.lines:
		return l, nil
	default:
	}
	select {
	case l := <-p.lines:
		return l, nil
	case <-p.exited:
		select {
		case l := <-p.lines: // printed just before it exited
			return l, nil
		default:
		}
		return nil, p.died()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// died is the error of a program that exited: impls.ErrDead with its
// status and the last line of its stderr.
func (p *program) died() error {
	late := ""
	if d := p.reapedAt.Sub(p.eofAt); d > time.Second {
		// Its exit or its stderr's end came long after its output closed
		// (seen once under stress-ng, unexplained): say so.
		late = fmt.Sprintf(", reaped %v after its output closed at %s", d.Round(time.Millisecond), p.eofAt.UTC().Format(time.RFC3339Nano))
	}
	return fmt.Errorf("%w: the client program exited (%s%s)%s", impls.ErrDead, exitStatus(p.err), late, p.tail.suffix())
}

// exitStatus says how a program ended.
func exitStatus(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// stop closes the program's input, waits up to grace for it to exit, then
// kills it (its group, with group) and waits until it is reaped.
func (p *program) stop(grace time.Duration, group bool) {
	p.inMu.Lock()
	_ = p.in.Close()
	p.inMu.Unlock()
	select {
	case <-p.exited:
		return
	case <-time.After(grace):
	}
	if group {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	} else {
		_ = p.cmd.Process.Kill()
	}
	<-p.exited
}

// hello sends h and reads the program's capabilities.
func (p *program) hello(ctx context.Context, h Hello) (Caps, error) {
	h.Type, h.Protocol = TypeHello, Version
	if err := p.send(h); err != nil {
		// Whether the write fails or the read finds the end of its output
		// depends only on how fast the program died: one message for both.
		select {
		case <-p.exited:
			return Caps{}, fmt.Errorf("it exited before it answered hello (%s)%s", exitStatus(p.err), p.tail.suffix())
		case <-ctx.Done():
			return Caps{}, ctx.Err()
		case <-time.After(helloTimeout):
			return Caps{}, fmt.Errorf("it closed its stdin before it read hello: %v", err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, helloTimeout)
	defer cancel()
	line, err := p.next(ctx)
	switch {
	case errors.Is(err, impls.ErrDead):
		return Caps{}, fmt.Errorf("it exited before it answered hello (%s)%s", exitStatus(p.err), p.tail.suffix())
	case err != nil:
		return Caps{}, fmt.Errorf("no answer to hello within %v (%s)", helloTimeout, helloStall(p.cmd.Process.Pid))
	}
	return parseCaps(line)
}

// helloStall says what a program that did not answer hello was doing: its
// state and the CPU time it used, which tell a program that waits or hangs
// (asleep, little CPU) from one the machine gave no CPU to (runnable,
// little CPU) and from one that works on (much CPU).
func helloStall(pid int) string {
	state, used, err := procfs.CPU(pid)
	if err != nil {
		return "its state cannot be read: " + err.Error()
	}
	what := map[byte]string{'R': "runnable", 'S': "asleep", 'D': "in uninterruptible wait", 'T': "stopped", 'Z': "exited"}[state]
	if what == "" {
		what = "state " + string(state)
	}
	return fmt.Sprintf("it is %s, and used %v of CPU since it started", what, used.Round(10*time.Millisecond))
}

// Probe starts spec's program with a probe hello, reads its capabilities
// and stops it. Its stderr goes to stderr. The error says in one line why
// the program could not be used: missing, not executable, exited or
// silent at start, or an answer that is not a hello_ok of this protocol.
func Probe(ctx context.Context, spec Spec, stderr io.Writer) (Caps, error) {
	p, err := start(spec, stderr, true, nil)
	if err != nil {
		return Caps{}, err
	}
	defer p.stop(2*time.Second, true)
	caps, err := p.hello(ctx, Hello{Probe: true, Backend: spec.Backend, Params: spec.Params})
	if err != nil {
		return Caps{}, fmt.Errorf("client program %s: %w", spec.Command[0], err)
	}
	return caps, nil
}

// tail keeps the end of what is written to it.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

const tailSize = 4 << 10

func (t *tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if len(t.buf) > tailSize {
		t.buf = t.buf[len(t.buf)-tailSize:]
	}
	return len(b), nil
}

// lastLine returns the last non-empty line written.
func (t *tail) lastLine() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := strings.Split(strings.TrimSpace(string(t.buf)), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// suffix is ": <last line>", or "" when nothing was written.
func (t *tail) suffix() string {
	if l := t.lastLine(); l != "" {
		return ": " + l
	}
	return ""
}
