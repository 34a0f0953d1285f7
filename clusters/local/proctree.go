package local

import (
	"context"
	"fmt"
	"hash/fnv"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/locktest/locktest/clusters/backend"
	"github.com/locktest/locktest/internal/procfs"
)

// Timings of a server that is a tree of processes (backend.Kind.Several).
const (
	// treeStopGrace is how long a stop waits after the server's stop
	// signal before it kills the tree: a SQL server's shutdown writes a
	// checkpoint.
	treeStopGrace = 10 * time.Second
	// treeGone bounds the wait for the killed members of a tree to go.
	treeGone = 5 * time.Second
)

// killTree freezes the process p, SIGKILLs every process below it, its
// process group and itself, and returns once p is reaped and the others
// are gone (or treeGone passed): a SQL server's backends, which make
// themselves session leaders, leave its group.
func killTree(p *proc) {
	p.ended.Store(true)
	_ = p.signal(syscall.SIGSTOP)
	kids := descendants(p.pid)
	for _, k := range kids {
		_ = syscall.Kill(k, syscall.SIGKILL)
	}
	_ = syscall.Kill(-p.pid, syscall.SIGKILL)
	_ = p.signal(syscall.SIGKILL)
	<-p.done
	deadline := time.Now().Add(treeGone)
	for _, k := range kids {
		for pidAlive(k) && time.Now().Before(deadline) {
			time.Sleep(2 * time.Millisecond)
		}
	}
}

// descendants returns the pids below pid in the process tree, parents
// first.
func descendants(pid int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, e := range ents {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 2 {
			continue
		}
		if ppid, err := strconv.Atoi(f[1]); err == nil {
			children[ppid] = append(children[ppid], child)
		}
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		q := queue[0]
		queue = queue[1:]
		for _, c := range children[q] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

// pidAlive reports whether pid is a process that has not exited (a zombie
// has).
func pidAlive(pid int) bool {
	st, err := procfs.State(fmt.Sprintf("/proc/%d/stat", pid))
	return err == nil && st != 'Z'
}

// runLogged runs bin with args and the extra environment env to its end,
// as cred's user when cred is set (setpriv), its output appended to
// logPath.
func runLogged(ctx context.Context, logPath, bin string, args, env []string, cred *syscall.Credential) error {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	if cred != nil {
		bin, args = "setpriv", append(setprivArgs(cred, bin), args...)
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	return cmd.Run()
}

// credOf returns the credential of the user called name, to run a server
// that refuses root as, when this process is root; nil otherwise.
func credOf(name string) (*syscall.Credential, error) {
	if name == "" || os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("the server cannot run as root and there is no user %q to run it as: run `make setup` (its Debian package creates it)", name)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("user %s has uid %q, gid %q", name, u.Uid, u.Gid)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// hostProgram resolves a program a node's launch runs: the path given (a
// cluster param named after the program), else the PATH, else where
// Debian's packages put it (debianPaths).
func hostProgram(name, given string) (string, error) {
	if given != "" {
		p, err := exec.LookPath(given)
		if err != nil {
			return "", fmt.Errorf("program %q not found or not executable", given)
		}
		return p, nil
	}
	for _, c := range debianPaths(name) {
		if isExecutable(c) {
			return c, nil
		}
	}
	built, target := builtPath(name)
	if built != "" && isExecutable(built) {
		return built, nil
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	if target != "" {
		return "", fmt.Errorf("%s not found in PATH nor at %s, where `make %s` builds it", name, built, target)
	}
	return "", fmt.Errorf("%s not found in PATH nor where Debian puts it", name)
}

// builtPath is where locktest builds the program called name itself, and
// the make target that does (backend.HostProgram.Built and Make), or ""
// for a program a package ships.
func builtPath(name string) (string, string) {
	for _, k := range backend.Kinds() {
		for _, p := range k.Programs {
			if p.Name == name && p.Built != nil {
				return p.Built(), p.Make
			}
		}
	}
	return "", ""
}

// debianPaths are where Debian's packages put the program called name
// when that is outside a user's PATH, as a kind of node says
// (backend.HostProgram.Debian: mariadbd in /usr/sbin, postgres in
// /usr/lib/postgresql/<version>/bin), the highest version first.
func debianPaths(name string) []string {
	for _, k := range backend.Kinds() {
		for _, p := range k.Programs {
			if p.Name == name && p.Debian != "" {
				return byVersion(p.Debian)
			}
		}
	}
	return nil
}

// byVersion returns the paths that match glob, whose * stands for a
// version in one element of the path, the highest version first.
func byVersion(glob string) []string {
	paths, _ := filepath.Glob(glob)
	at := slices.IndexFunc(strings.Split(glob, "/"), func(e string) bool { return strings.Contains(e, "*") })
	version := func(p string) int {
		if e := strings.Split(p, "/"); at >= 0 && at < len(e) {
			v, _ := strconv.Atoi(e[at])
			return v
		}
		return 0
	}
	sort.SliceStable(paths, func(a, b int) bool { return version(paths[a]) > version(paths[b]) })
	return paths
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// socketPath is the Unix socket of a server that always makes one
// (mariadbd), for the node in dir: in dir when the path fits a socket
// address, else a file of its own in the temporary folder, named after
// dir (`locktest cleanup` removes those no server answers on).
func socketPath(dir string) string {
	p := filepath.Join(dir, "mariadb.sock")
	if len(p) < 100 {
		return p
	}
	h := fnv.New64a()
	h.Write([]byte(dir))
	return filepath.Join(os.TempDir(), fmt.Sprintf("locktest-mariadb-%016x.sock", h.Sum64()))
}

// removeLeftovers removes what a node whose server died leaves outside
// its own files: its socket in the temporary folder, and the System V
// shared memory segment of a PostgreSQL whose postmaster is gone (line 7
// of postmaster.pid names it; only a clean shutdown removes it).
func removeLeftovers(n *kindNode) {
	if p := socketPath(n.dir); !strings.HasPrefix(p, n.dir) {
		os.Remove(p)
	}
	b, err := os.ReadFile(filepath.Join(n.dataDir(), "postmaster.pid"))
	if err != nil {
		return
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) < 7 {
		return
	}
	if pid, err := strconv.Atoi(strings.TrimSpace(lines[0])); err != nil || pidAlive(pid) {
		return
	}
	if f := strings.Fields(lines[6]); len(f) == 2 {
		if id, err := strconv.Atoi(f[1]); err == nil {
			removeShm(id)
		}
	}
}
