// Package local is the cluster provider that runs the nodes of a lock service
// as processes on this host. Each node is a child
// of the driver: it lives in its own process group, dies with the driver
// (Linux parent-death signal), and is reaped by a goroutine the moment it
// exits, so no fault leaves a zombie or an orphan behind. Every signal is sent
// by pid to a process this package started, never by name.
//
// Each backend registers a Factory (see Register); New builds a cluster of
// any of them, and Backends lists them.
package local

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/locktest/locktest/internal/procfs"
)

// proc is one node process started by this package and the goroutine that
// reaps it.
type proc struct {
	cmd  *exec.Cmd
	pid  int
	done chan struct{} // closed once cmd.Wait has returned
	err  error         // cmd.Wait's result; read it only after done is closed
	// ended is set before this package kills or stops the process, so its
	// exit can be told apart from a crash.
	ended atomic.Bool
}

// spawnSpec says how to start one node process.
type spawnSpec struct {
	// Bin and Args are the program and its arguments.
	Bin  string
	Args []string
	// Dir is the working directory.
	Dir string
	// LogPath receives the process's stdout and stderr (appended).
	LogPath string
	// Env is added to the driver's environment (e.g. the clock shim's
	// LD_PRELOAD and offset file).
	Env []string
	// Host is where the node runs; a host with a network namespace runs the
	// program inside it through `ip netns exec`, which execs the program in
	// place, so the pid is the program's own.
	Host Host
	// Cred, if set, runs the program as that user and group (PostgreSQL
	// refuses to run as root) through setpriv(1), which also execs in
	// place. The program keeps one capability, CAP_DAC_READ_SEARCH, so it
	// can reach its node directory below directories that only root may
	// search (a test's 0700 temporary directory); it writes only where its
	// user may.
	Cred *syscall.Credential
}

// spawn starts bin with args in dir, with stdout and stderr appended to
// logPath (a daemon prints its early errors there before it opens its own
// log), and reaps it in a goroutine. It returns the size the log had before
// the start, so that errors can quote only what this run wrote.
func spawn(bin string, args []string, dir, logPath string) (*proc, int64, error) {
	return spawnWith(spawnSpec{Bin: bin, Args: args, Dir: dir, LogPath: logPath})
}

// spawnWith starts the process s describes; see spawn.
func spawnWith(s spawnSpec) (*proc, int64, error) {
	bin, args, dir, logPath := s.Bin, s.Args, s.Dir, s.LogPath
	if s.Cred != nil {
		bin, args = "setpriv", append(setprivArgs(s.Cred, bin), args...)
	}
	if s.Host.NetNS != "" {
		args = append([]string{"netns", "exec", s.Host.NetNS, bin}, args...)
		bin = "ip"
	}
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close() // the child holds its own copy of the descriptor
	off, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return nil, 0, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	if len(s.Env) > 0 {
		cmd.Env = append(os.Environ(), s.Env...)
	}
	cmd.Stdout = f
	cmd.Stderr = f
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, 0, err
	}
	p := &proc{cmd: cmd, pid: cmd.Process.Pid, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, off, nil
}

// setprivArgs are the arguments of setpriv(1) that run bin as c's user and
// group with only CAP_DAC_READ_SEARCH, killed when its parent dies; see
// spawnSpec.Cred.
func setprivArgs(c *syscall.Credential, bin string) []string {
	// The kernel clears the parent-death signal when the user changes;
	// setpriv sets it again after the change, so the program still dies
	// with the driver.
	return []string{fmt.Sprintf("--reuid=%d", c.Uid), fmt.Sprintf("--regid=%d", c.Gid), "--clear-groups",
		"--inh-caps=+dac_read_search", "--ambient-caps=+dac_read_search", "--pdeathsig=KILL", bin}
}

// running reports whether p is a process that has not exited yet; a nil p
// is not running.
func (p *proc) running() bool {
	if p == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// signal sends sig to the process. os.Process refuses to signal a process
// that has already been reaped, so a recycled pid is never hit.
func (p *proc) signal(sig os.Signal) error {
	return p.cmd.Process.Signal(sig)
}

// kill sends SIGKILL and returns once the process has been reaped.
func (p *proc) kill() {
	p.ended.Store(true)
	_ = p.signal(syscall.SIGKILL) // fails only if the process is gone already
	<-p.done
}

// stop asks the process to exit with SIGTERM (followed by SIGCONT, so a
// paused process can act on it), waits up to grace or until ctx ends, then
// kills it. It returns once the process has been reaped and reports whether
// it exited on its own.
func (p *proc) stop(ctx context.Context, grace time.Duration) (graceful bool) {
	if !p.running() {
		return true
	}
	p.ended.Store(true)
	_ = p.signal(syscall.SIGTERM)
	_ = p.signal(syscall.SIGCONT)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	p.kill()
	return false
}

// waitStopped waits, for at most limit, until the kernel reports every
// thread of the process as stopped, so that a pause has taken effect when
// Pause returns.
func (p *proc) waitStopped(limit time.Duration) error {
	return procfs.WaitStopped(p.pid, limit)
}

// exitStatus describes how a reaped process ended.
func (p *proc) exitStatus() string {
	if p.err == nil {
		return "exit status 0"
	}
	return p.err.Error()
}

// handedOut remembers the ports freePort gave in this process, and when,
// so that runs made side by side (debate --parallel) are never given the
// same port before the first has bound it.
var handedOut = struct {
	sync.Mutex
	at map[int]time.Time
}{at: map[int]time.Time{}}

// portHold is how long a port freePort gave stays out of its answers.
const portHold = 2 * time.Minute

// freePort asks the kernel for a free TCP port on 127.0.0.1 that this
// process has not handed out in the last portHold. The port is free only
// until someone else takes it, so callers retry on a bind failure.
func freePort() (int, error) {
	handedOut.Lock()
	defer handedOut.Unlock()
	now := time.Now()
	for p, t := range handedOut.at {
		if now.Sub(t) > portHold {
			delete(handedOut.at, p)
		}
	}
	for range 50 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("find a free port: %w", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		if err := l.Close(); err != nil {
			return 0, err
		}
		if _, taken := handedOut.at[port]; !taken {
			handedOut.at[port] = now
			return port, nil
		}
	}
	return 0, fmt.Errorf("find a free port: the kernel kept offering ports this process handed out in the last %v", portHold)
}

// portFree reports whether 127.0.0.1:port can be listened on right now.
func portFree(port int) bool {
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

// logTail returns up to n last lines that were written to path after offset
// off.
func logTail(path string, off int64, n int) []string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return nil
	}
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		if strings.TrimSpace(line) == "" {
			continue
		}
		lines = append(lines, line)
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return lines
}

// copyFile copies src to dst, replacing dst.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// pause freezes a running process with SIGSTOP and returns once the kernel
// reports every thread stopped, waiting at most limit.
func (p *proc) pause(limit time.Duration) error {
	if !p.running() {
		return errors.New("node is not running")
	}
	if err := p.signal(syscall.SIGSTOP); err != nil {
		return err
	}
	return p.waitStopped(limit)
}

// resume thaws the process with SIGCONT; a process that is not running (or
// not paused) is left as it is.
func (p *proc) resume() error {
	if !p.running() {
		return nil
	}
	if err := p.signal(syscall.SIGCONT); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	return nil
}
