//go:build linux && amd64

// Package synctrace records what a node program syncs when the LD_PRELOAD
// clock shim cannot see it: a Go program (locktest's own node program,
// embedding etcd or NATS) makes its system calls without libc. It writes
// the same sync record as the shim (clusters/durable), so a power loss
// can cut the node's files back to what it made durable.
//
// It works with seccomp's user notification (Linux 5.0, and pidfd_getfd
// from 5.6), not ptrace: the node's process installs a seccomp filter on
// itself that sends each call of the fsync family (fsync, fdatasync,
// sync_file_range, syncfs, msync, sync), and each close, to a supervisor
// process, and then
// execs itself again, so that the server runs with the filter on every
// thread it ever makes. Every other system call runs as before, at no
// cost. The supervisor, a child of the node, takes each notified call:
//
//   - fsync, fdatasync and syncfs it makes itself, on a duplicate of the
//     node's file descriptor (pidfd_getfd: the same open file; where the
//     kernel refuses that, as Docker's default seccomp profile does
//     without CAP_SYS_PTRACE, on the same file opened again through
//     /proc/<pid>/fd, since a sync syncs the file, not the descriptor), and
//     answers the node with the call's result; sync_file_range it makes as
//     fdatasync, which syncs at least as much. When the call succeeded on
//     a regular file, it appends the file's identity and the size it had
//     when the sync began to the record (durable.Sync.Line), as the shim
//     does after a sync that succeeded.
//   - a close of a regular file opened with O_SYNC or O_DSYNC, whose
//     every write was durable when it returned, it records with the
//     file's size, and lets the kernel run the close.
//   - msync and sync it lets the kernel run (SECCOMP_USER_NOTIF_FLAG_CONTINUE)
//     and records nothing: an msync names memory, not a file, and a sync
//     names no file. A power loss then cuts more than it might, never
//     less (NATS and etcd call neither).
//
// The supervisor ends when the node's process ends (the listener hangs
// up), or with it (its parent-death signal). A node whose supervisor is
// gone would see its syncs fail, so the supervisor is started before the
// filter and holds the listener from then on.
package synctrace

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/locktest/locktest/clusters/durable"
)

// The environment a traced node program runs with. durable.EnvFile names
// the record and asks for the trace; EnvTraced marks the process that
// already runs under the filter, and EnvSupervisor the supervisor.
const (
	EnvTraced     = "LOCKTEST_SYNC_TRACED"
	EnvSupervisor = "LOCKTEST_SYNC_SUPERVISOR"
)

// auditArch is the architecture whose system calls the filter traces:
// this build's (x86-64, the machines locktest runs on).
const auditArch = unix.AUDIT_ARCH_X86_64

// supervisorName is the supervisor's argv[0], which tells it from the node
// in a process list and in a provider's check of a node's command line.
const supervisorName = "locktest-sync-supervisor"

// Asked says whether the environment asks this process to run traced and
// it does not yet: the node program then calls Start.
func Asked() bool { return os.Getenv(durable.EnvFile) != "" && os.Getenv(EnvTraced) == "" }

// IsSupervisor says whether this process is a node's supervisor, which
// runs Supervise instead of the node.
func IsSupervisor() bool { return os.Getenv(EnvSupervisor) != "" }

// Start makes this process run traced: it starts the supervisor (this
// executable again, with EnvSupervisor), installs the seccomp filter on
// the calling thread with a listener it hands to the supervisor, and execs
// this executable again with the same arguments and EnvTraced, so that the
// program's every thread runs under the filter. It returns only on
// failure, before anything was changed that the process could not run
// without: a failure after the filter went on ends the process.
func Start() error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("sync trace: find this executable: %w", err)
	}
	// One thread forks the supervisor, installs the filter and execs: the
	// filter is that thread's, and exec keeps it alone, so that the new
	// image has it on every thread; the supervisor's parent-death signal
	// is tied to that thread too, which exec keeps.
	runtime.LockOSThread()
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("sync trace: socketpair: %w", err)
	}
	mine, theirs := os.NewFile(uintptr(pair[0]), "sync-trace"), os.NewFile(uintptr(pair[1]), "sync-trace-supervisor")
	defer mine.Close()
	null, err := os.Open(os.DevNull)
	if err != nil {
		theirs.Close()
		return fmt.Errorf("sync trace: %w", err)
	}
	sup, err := os.StartProcess(exe, append([]string{supervisorName}, os.Args[1:]...), &os.ProcAttr{
		Env:   append(os.Environ(), EnvSupervisor+"=1"),
		Files: []*os.File{null, os.Stderr, os.Stderr, theirs},
		Sys:   &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL},
	})
	null.Close()
	theirs.Close()
	if err != nil {
		return fmt.Errorf("sync trace: start the supervisor: %w", err)
	}
	_ = sup.Release()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("sync trace: no_new_privs: %w", err)
	}
	listener, err := installFilter()
	if err != nil {
		return fmt.Errorf("sync trace: seccomp filter: %w (the kernel needs seccomp user notification, Linux 5.0 or later)", err)
	}
	// From here a sync of this thread waits for the supervisor.
	if err := unix.Sendmsg(int(mine.Fd()), []byte{1}, unix.UnixRights(listener), nil, 0); err != nil {
		fatal("hand the listener to the supervisor", err)
	}
	unix.Close(listener)
	ack := make([]byte, 1)
	if _, err := mine.Read(ack); err != nil {
		fatal("the supervisor's ack", err)
	}
	env := append(os.Environ(), EnvTraced+"=1")
	fatal("exec "+exe, syscall.Exec(exe, os.Args, env))
	return nil
}

// fatal ends a process that cannot run on: its filter is on, and its
// syncs would wait for a supervisor that does not answer.
func fatal(what string, err error) {
	fmt.Fprintf(os.Stderr, "sync trace: %s: %v (%s)\n", what, err, "the node cannot run without it")
	os.Exit(1)
}

// The seccomp structures of linux/seccomp.h, as the ioctls take them.
type seccompData struct {
	Nr                 int32
	Arch               uint32
	InstructionPointer uint64
	Args               [6]uint64
}

type seccompNotif struct {
	ID    uint64
	Pid   uint32
	Flags uint32
	Data  seccompData
}

type seccompNotifResp struct {
	ID    uint64
	Val   int64
	Error int32
	Flags uint32
}

// traced are the system calls the filter sends to the supervisor: the
// fsync family, and close, for files written through a descriptor opened
// with O_SYNC or O_DSYNC, whose every write is durable when it returns.
var traced = []uint32{unix.SYS_FSYNC, unix.SYS_FDATASYNC, unix.SYS_SYNC_FILE_RANGE, unix.SYS_SYNCFS, unix.SYS_MSYNC, unix.SYS_SYNC, unix.SYS_CLOSE}

// filter is the classic BPF program: on this machine's architecture, the
// traced calls go to the listener, every other call is allowed; a call of
// another architecture's ABI (none on x86-64 here) is allowed too.
func filter() []unix.SockFilter {
	const (
		ldW  = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeqK = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		retK = unix.BPF_RET | unix.BPF_K
	)
	n := uint8(len(traced))
	prog := []unix.SockFilter{
		{Code: ldW, K: uint32(unsafe.Offsetof(seccompData{}.Arch))},
		{Code: jeqK, K: auditArch, Jt: 0, Jf: n + 1}, // another ABI: allow
		{Code: ldW, K: uint32(unsafe.Offsetof(seccompData{}.Nr))},
	}
	for i, nr := range traced {
		// Jump to the notification, n-i instructions on.
		prog = append(prog, unix.SockFilter{Code: jeqK, K: nr, Jt: n - uint8(i), Jf: 0})
	}
	return append(prog,
		unix.SockFilter{Code: retK, K: unix.SECCOMP_RET_ALLOW},
		unix.SockFilter{Code: retK, K: unix.SECCOMP_RET_USER_NOTIF},
	)
}

// installFilter puts the filter on the calling thread and returns its
// listener.
func installFilter() (int, error) {
	prog := filter()
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	fd, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_NEW_LISTENER, uintptr(unsafe.Pointer(&fprog)))
	runtime.KeepAlive(prog)
	if errno != 0 {
		return -1, errno
	}
	return int(fd), nil
}

// Supervise is the supervisor's body: it takes the listener from the
// socket on file descriptor 3, opens the record named by durable.EnvFile,
// acks, and answers the node's notified syncs until the node ends. It
// returns nil then.
func Supervise() error {
	record := os.Getenv(durable.EnvFile)
	sock := os.NewFile(3, "sync-trace")
	defer sock.Close()
	buf, oob := make([]byte, 1), make([]byte, unix.CmsgSpace(4))
	_, oobn, _, _, err := unix.Recvmsg(int(sock.Fd()), buf, oob, 0)
	if err != nil {
		return fmt.Errorf("sync supervisor: receive the listener: %w", err)
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return fmt.Errorf("sync supervisor: no listener in the message (%v)", err)
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		return fmt.Errorf("sync supervisor: no listener in the message (%v)", err)
	}
	listener := fds[0]
	defer unix.Close(listener)
	out, err := os.OpenFile(record, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("sync supervisor: %w", err)
	}
	defer out.Close()
	node := os.Getppid()
	pidfd, err := unix.PidfdOpen(node, 0)
	if err != nil {
		return fmt.Errorf("sync supervisor: pidfd of the node %d: %w", node, err)
	}
	defer unix.Close(pidfd)
	if _, err := sock.Write([]byte{1}); err != nil {
		return fmt.Errorf("sync supervisor: ack: %w", err)
	}
	s := &supervisor{listener: listener, pidfd: pidfd, node: node, out: out, reopen: reopenAlways}
	return s.serve()
}

// reopenAlways makes a supervisor open the node's files again through
// /proc from the start, as it does once the kernel refused pidfd_getfd:
// the tests set it, to check that way on a kernel that lends descriptors.
var reopenAlways bool

// supervisor answers one node's notified syncs.
type supervisor struct {
	listener, pidfd, node int
	out                   *os.File
	// reopen is set once the kernel refused pidfd_getfd (EPERM): the
	// supervisor then opens the node's files again through /proc.
	reopen bool
}

// open returns a descriptor of the file that the node's descriptor
// target names, which the caller closes: a duplicate of it
// (pidfd_getfd), or, where the kernel refuses to lend one, the same file
// opened again read-only through /proc/<pid>/fd/<target>, which the
// supervisor may open as the node's parent and owner. A sync through
// either syncs the file, and a stat of either sees its size. It fails for
// a descriptor the node does not have open, and for one that is no file
// (a socket).
func (s *supervisor) open(target int) (int, error) {
	if !s.reopen {
		fd, err := unix.PidfdGetfd(s.pidfd, target, 0)
		if !errors.Is(err, unix.EPERM) && !errors.Is(err, unix.ENOSYS) {
			return fd, err
		}
		s.reopen = true
	}
	return unix.Open(s.proc("fd", target), unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
}

// proc is the path of the node's descriptor target in its /proc folder
// dir ("fd" or "fdinfo").
func (s *supervisor) proc(dir string, target int) string {
	return "/proc/" + strconv.Itoa(s.node) + "/" + dir + "/" + strconv.Itoa(target)
}

// flags returns the file status flags of the node's descriptor target, as
// its /proc/<pid>/fdinfo says them (they are the node's open file's,
// which a file opened again would not have).
func (s *supervisor) flags(target int) (int, error) {
	b, err := os.ReadFile(s.proc("fdinfo", target))
	if err != nil {
		return 0, err
	}
	return fdinfoFlags(string(b))
}

// fdinfoFlags reads the flags line of a /proc/<pid>/fdinfo file: octal.
func fdinfoFlags(info string) (int, error) {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(line, "flags:"); ok {
			f, err := strconv.ParseInt(strings.TrimSpace(v), 8, 64)
			return int(f), err
		}
	}
	return 0, fmt.Errorf("no flags line in %q", info)
}

// serve answers notifications until the node has no thread left under
// the filter.
func (s *supervisor) serve() error {
	for {
		fds := []unix.PollFd{{Fd: int32(s.listener), Events: unix.POLLIN}}
		if _, err := unix.Poll(fds, -1); err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return fmt.Errorf("sync supervisor: poll: %w", err)
		}
		if fds[0].Revents&unix.POLLIN == 0 {
			return nil // POLLHUP: the node is gone
		}
		var n seccompNotif
		if err := ioctl(s.listener, unix.SECCOMP_IOCTL_NOTIF_RECV, unsafe.Pointer(&n)); err != nil {
			if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EINTR) {
				continue // the thread died before it was read
			}
			return fmt.Errorf("sync supervisor: receive: %w", err)
		}
		resp := s.answer(&n)
		if err := ioctl(s.listener, unix.SECCOMP_IOCTL_NOTIF_SEND, unsafe.Pointer(&resp)); err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("sync supervisor: answer: %w", err)
		}
	}
}

// answer makes the notified call n and returns the answer the node gets.
func (s *supervisor) answer(n *seccompNotif) seccompNotifResp {
	resp := seccompNotifResp{ID: n.ID}
	var sync func(fd int) error
	switch n.Data.Nr {
	case unix.SYS_FSYNC:
		sync = unix.Fsync
	case unix.SYS_FDATASYNC, unix.SYS_SYNC_FILE_RANGE:
		sync = unix.Fdatasync
	case unix.SYS_SYNCFS:
		sync = func(fd int) error { return unix.Syncfs(fd) }
	case unix.SYS_CLOSE:
		s.closing(n)
		resp.Flags = unix.SECCOMP_USER_NOTIF_FLAG_CONTINUE
		return resp
	default:
		resp.Flags = unix.SECCOMP_USER_NOTIF_FLAG_CONTINUE
		return resp
	}
	target := int(int32(n.Data.Args[0]))
	fd, err := s.open(target)
	switch {
	case errors.Is(err, unix.EBADF) || errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENXIO):
		// Not an open descriptor of the node, or not a file (a
		// socket): the kernel runs the call and gives its answer.
		resp.Flags = unix.SECCOMP_USER_NOTIF_FLAG_CONTINUE
		return resp
	case err != nil:
		// A file the supervisor cannot reach: a sync of it would go
		// unrecorded, and a power loss would cut it. The node is told
		// its sync failed rather than be cut wrongly.
		fmt.Fprintf(os.Stderr, "sync supervisor: descriptor %d of the node: %v\n", target, err)
		resp.Error, resp.Val = -int32(unix.EIO), -1
		return resp
	}
	defer unix.Close(fd)
	id, size, regular, serr := durable.StatFD(fd)
	began := monotonic()
	if err := sync(fd); err != nil {
		var errno unix.Errno
		if !errors.As(err, &errno) {
			errno = unix.EIO
		}
		resp.Error, resp.Val = -int32(errno), -1
		return resp
	}
	if serr == nil && regular {
		if err := s.record(n, target, durable.Sync{Began: began, File: id, Size: size}); err != nil {
			// A sync the record lacks would be cut by a power loss: the
			// node is told its sync failed rather than be cut wrongly.
			resp.Error, resp.Val = -int32(unix.EIO), -1
		}
	}
	return resp
}

// record appends sync, a sync of the node's descriptor target that the
// notification n is about, to the record, with the syncing thread and
// the file's path now. A failed write is said on standard error and
// returned.
func (s *supervisor) record(n *seccompNotif, target int, sync durable.Sync) error {
	sync.Pid = int(n.Pid)
	sync.Path, _ = os.Readlink(s.proc("fd", target))
	if _, err := s.out.WriteString(sync.Line()); err != nil {
		fmt.Fprintf(os.Stderr, "sync supervisor: write the record: %v\n", err)
		return err
	}
	return nil
}

// closing records, for a close the node is about to make of a regular
// file it opened with O_SYNC or O_DSYNC, the file's size now: every write
// through that descriptor was durable when it returned (NATS writes its
// raft snapshots and its stream metadata so, then renames them into
// place). A write through it that a power loss comes between and the
// close is cut, which can only cut more than a real loss would. Any
// other close records nothing.
func (s *supervisor) closing(n *seccompNotif) {
	target := int(int32(n.Data.Args[0]))
	flags, err := s.flags(target)
	if err != nil || flags&(unix.O_SYNC|unix.O_DSYNC) == 0 {
		return
	}
	fd, err := s.open(target)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	id, size, regular, err := durable.StatFD(fd)
	if err != nil || !regular {
		return
	}
	_ = s.record(n, target, durable.Sync{Began: monotonic(), File: id, Size: size})
}

// monotonic is CLOCK_MONOTONIC in ns, the shim's clock for Began.
func monotonic() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

func ioctl(fd int, req uint, arg unsafe.Pointer) error {
	for {
		_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), uintptr(req), uintptr(arg))
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 {
			return errno
		}
		return nil
	}
}
