package images

import (
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/locktest/locktest/clusters/backend"
)

// pgShareSkip are the parts of PostgreSQL's share directory a server does
// not need: its manual pages. (Of its lib directory the image takes the
// modules but the JIT: llvmjit.so links libLLVM, over 100 MB, and without
// it the server just does not compile queries; its bitcode and the
// extension build kit stay out too.)
var pgShareSkip = []string{"man"}

// AddHostPrograms adds each of progs, found in this host's PATH, to r with
// the libraries it needs (Rootfs.AddProgram). A program the host lacks is
// an error naming who needs it, and why when why is not "".
func AddHostPrograms(ctx context.Context, r *Rootfs, who, why string, progs []string) error {
	for _, p := range progs {
		bin, err := exec.LookPath(p)
		if err != nil {
			return fmt.Errorf("%s: %s is not installed on this host%s: run `make setup`", who, p, why)
		}
		bin, _ = filepath.Abs(bin)
		if err := r.AddProgram(ctx, who, bin); err != nil {
			return err
		}
	}
	return nil
}

// LookProgram returns the absolute path of program in the PATH or at
// fallback, or "".
func LookProgram(program, fallback string) string {
	for _, p := range []string{program, fallback} {
		if bin, err := exec.LookPath(p); err == nil {
			bin, _ = filepath.Abs(bin)
			return bin
		}
	}
	return ""
}

// AddMariaDB adds to r this host's MariaDB server and what its install
// script needs, and reports whether this host has them.
func AddMariaDB(ctx context.Context, r *Rootfs) (bool, error) {
	server := LookProgram("mariadbd", "/usr/sbin/mariadbd")
	install := LookProgram("mariadb-install-db", "/usr/bin/mariadb-install-db")
	defaults := LookProgram("my_print_defaults", "/usr/bin/my_print_defaults")
	if server == "" || install == "" || defaults == "" {
		return false, nil
	}
	for _, bin := range []string{server, defaults} {
		if err := r.AddProgram(ctx, "lab", bin); err != nil {
			return false, err
		}
	}
	// A shell script, run by the lab's sh.
	if err := r.AddPath(install); err != nil {
		return false, err
	}
	for _, dir := range []string{"/usr/share/mysql", "/usr/share/mariadb", "/usr/lib/mysql/plugin"} {
		if _, err := os.Stat(dir); err == nil {
			if err := r.AddPath(dir); err != nil {
				return false, err
			}
		}
	}
	return true, nil
}

// AddPostgres adds to r this host's PostgreSQL server and initdb (those
// of HighestPostgres) and reports whether this host has them.
func AddPostgres(ctx context.Context, r *Rootfs) (bool, error) {
	best, version := HighestPostgres()
	if best == "" {
		return false, nil
	}
	home := filepath.Dir(filepath.Dir(best)) // /usr/lib/postgresql/<version>
	for _, bin := range []string{best, filepath.Join(home, "bin", "initdb")} {
		if err := r.AddProgram(ctx, "lab", bin); err != nil {
			return false, err
		}
	}
	mods, _ := filepath.Glob(filepath.Join(home, "lib", "*.so"))
	for _, m := range mods {
		if strings.HasPrefix(filepath.Base(m), "llvmjit") {
			continue
		}
		if err := r.AddPath(m); err != nil {
			return false, err
		}
		// Most modules link the C library alone, which the image has:
		// ldd runs only for the others. A module whose libraries this
		// host lacks is one no server of the lab loads.
		if needsMoreThanLibc(m) {
			if _, err := r.AddLibs(ctx, m); err != nil {
				return false, err
			}
		}
	}
	if err := addDirBut(r, filepath.Join("/usr/share/postgresql", strconv.Itoa(version)), pgShareSkip); err != nil {
		return false, err
	}
	// The time zones, which initdb and the server look up (Debian builds
	// PostgreSQL with the system's).
	if _, err := os.Stat("/usr/share/zoneinfo"); err == nil {
		if err := r.AddPath("/usr/share/zoneinfo"); err != nil {
			return false, err
		}
	}
	uid, gid := "999", "999"
	if u, err := user.Lookup(backend.PostgresUser); err == nil {
		uid, gid = u.Uid, u.Gid
	}
	appendLine(r, "/etc/passwd", fmt.Sprintf("postgres:x:%s:%s:PostgreSQL administrator:/var/lib/postgresql:/bin/sh", uid, gid))
	appendLine(r, "/etc/group", fmt.Sprintf("postgres:x:%s:", gid))
	return true, nil
}

// HighestPostgres returns the postgres of the highest
// /usr/lib/postgresql/<version>/bin that has initdb too, and the version;
// "" when there is none.
func HighestPostgres() (string, int) {
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres")
	best, version := "", -1
	for _, b := range bins {
		v, err := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(b))))
		if err == nil && v > version && isExec(b) && isExec(filepath.Join(filepath.Dir(b), "initdb")) {
			best, version = b, v
		}
	}
	return best, version
}

// addDirBut adds the host directory dir with everything below it but its
// entries named in skip.
func addDirBut(r *Rootfs, dir string, skip []string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	r.AddDir(dir, 0o755)
	for _, e := range entries {
		if slices.Contains(skip, e.Name()) {
			continue
		}
		if err := r.AddPath(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// appendLine appends line to the file p that the rootfs made up (AddFile).
func appendLine(r *Rootfs, p, line string) {
	e, ok := r.entries[path.Clean(p)]
	if !ok || e.src != "" {
		r.AddFile(p, []byte(line+"\n"), 0o644)
		return
	}
	data := append(append([]byte{}, e.data...), line+"\n"...)
	r.AddFile(p, data, e.mode)
}

// needsMoreThanLibc reports whether the ELF file p names a library it
// needs besides the C and maths libraries, or cannot be read as one.
func needsMoreThanLibc(p string) bool {
	f, err := elf.Open(p)
	if err != nil {
		return true
	}
	defer f.Close()
	libs, err := f.ImportedLibraries()
	if err != nil {
		return true
	}
	return slices.ContainsFunc(libs, func(l string) bool { return l != "libc.so.6" && l != "libm.so.6" })
}

func isExec(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// sqlImageTools are the programs a SQL server's image holds besides the
// server's own: the shell and tools of the container's start (the data
// directory's creation at the first start, which mariadb-install-db's
// script does with sed and the like, and PostgreSQL's user switch).
var sqlImageTools = []string{"sh", "cat", "mkdir", "rm", "chmod", "chown", "mv", "ls", "sed", "awk", "grep", "tail", "env",
	"id", "dirname", "uname", "hostname", "setpriv"}

// SQLRootfs assembles the image called server of one SQL server from this
// host's installed packages, as the ssh lab's image (clusters/sshlab)
// carries it: backend.RootfsMariaDB (mariadbd, mariadb-install-db and what
// it needs, AddMariaDB) or backend.RootfsPostgres (the highest installed
// PostgreSQL's postgres and initdb, its modules, share directory and time
// zones, and the postgres user, AddPostgres), with the tools of
// sqlImageTools. A host without the server is an error saying what to
// install.
func SQLRootfs(ctx context.Context, of backend.Rootfs, server string) (*Rootfs, error) {
	r := BaseRootfs()
	var ok bool
	var err error
	switch of {
	case backend.RootfsMariaDB:
		ok, err = AddMariaDB(ctx, r)
	case backend.RootfsPostgres:
		ok, err = AddPostgres(ctx, r)
	default:
		return nil, fmt.Errorf("images build: no SQL server %q", server)
	}
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("images build %s: this host has no %s server to copy: run `make setup`", server, server)
	}
	if err := AddHostPrograms(ctx, r, "images build "+server, "", sqlImageTools); err != nil {
		return nil, err
	}
	// The container starts /bin/sh, and mariadb-install-db is a script
	// for it.
	if err := r.AddPath("/bin/sh"); err != nil {
		return nil, err
	}
	return r, nil
}
