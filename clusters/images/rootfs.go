package images

import (
	"archive/tar"
	"archive/zip"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Rootfs is a container's root file system assembled from files of this
// host, to be written as a tar stream for `docker import`. Paths keep their
// host location; the symbolic links met on the way (Debian's /lib ->
// usr/lib, /etc/alternatives) are kept as links, with their targets. The
// zero value is empty and ready to use; it is not safe for concurrent use.
type Rootfs struct {
	entries map[string]*rootEntry // by absolute path
}

// rootEntry is one file, directory or link of a Rootfs.
type rootEntry struct {
	kind  byte   // tar.TypeReg, TypeDir or TypeSymlink
	src   string // host path of a regular file copied from the host
	data  []byte // content of a file made up here (src == "")
	link  string // target of a symlink
	mode  fs.FileMode
	size  int64
	mtime time.Time
	// byContent makes Hash read the file rather than trust its size and
	// time (a freshly built binary is new every time, its content not).
	byContent bool
}

// maxLinks bounds the symbolic links followed for one path.
const maxLinks = 40

func (r *Rootfs) put(p string, e *rootEntry) {
	if r.entries == nil {
		r.entries = map[string]*rootEntry{}
	}
	r.entries[p] = e
}

// Has reports whether p (absolute) resolves to something in the rootfs,
// following the rootfs's own symbolic links as the container will.
func (r *Rootfs) Has(p string) bool {
	return r.resolve(p, 0)
}

func (r *Rootfs) resolve(p string, depth int) bool {
	if depth > maxLinks {
		return false
	}
	parts := strings.Split(strings.TrimPrefix(path.Clean(p), "/"), "/")
	cur := "/"
	for i, part := range parts {
		next := path.Join(cur, part)
		e, ok := r.entries[next]
		if !ok {
			return false
		}
		if e.kind == tar.TypeSymlink {
			target := e.link
			if !path.IsAbs(target) {
				target = path.Join(cur, target)
			}
			return r.resolve(path.Join(append([]string{target}, parts[i+1:]...)...), depth+1)
		}
		cur = next
	}
	return true
}

// Paths returns every path of the rootfs, sorted.
func (r *Rootfs) Paths() []string {
	out := make([]string, 0, len(r.entries))
	for p := range r.entries {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// Link returns the target of the symlink at p, and whether p is one.
func (r *Rootfs) Link(p string) (string, bool) {
	e, ok := r.entries[path.Clean(p)]
	if !ok || e.kind != tar.TypeSymlink {
		return "", false
	}
	return e.link, true
}

// Content returns the content of the file at p that the rootfs made up
// (AddFile), and whether there is one: a host file (AddPath, AddHostFile)
// gives false.
func (r *Rootfs) Content(p string) ([]byte, bool) {
	e, ok := r.entries[path.Clean(p)]
	if !ok || e.kind != tar.TypeReg || e.src != "" {
		return nil, false
	}
	return e.data, true
}

// AddDir adds an empty directory (and its parents) with mode perm, or
// gives an existing directory that mode.
func (r *Rootfs) AddDir(p string, perm fs.FileMode) {
	p = path.Clean(p)
	r.addParents(p)
	if e, ok := r.entries[p]; ok && e.kind == tar.TypeDir {
		e.mode = perm
		return
	}
	r.put(p, &rootEntry{kind: tar.TypeDir, mode: perm})
}

// AddFile adds a file with the given content (and its parent directories).
func (r *Rootfs) AddFile(p string, data []byte, perm fs.FileMode) {
	p = path.Clean(p)
	r.addParents(p)
	r.put(p, &rootEntry{kind: tar.TypeReg, data: data, mode: perm, size: int64(len(data))})
}

// AddHostFile adds the host file src at the path p of the rootfs. Hash
// identifies it by its content.
func (r *Rootfs) AddHostFile(p, src string) error {
	fi, err := os.Stat(src)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("rootfs: %s is not a regular file", src)
	}
	p = path.Clean(p)
	r.addParents(p)
	r.put(p, &rootEntry{kind: tar.TypeReg, src: src, mode: fi.Mode().Perm(), size: fi.Size(), byContent: true})
	return nil
}

// addParents adds the directories above p that are missing, as plain
// 0755 directories.
func (r *Rootfs) addParents(p string) {
	for d := path.Dir(p); d != "/" && d != "."; d = path.Dir(d) {
		if _, ok := r.entries[d]; ok {
			continue
		}
		r.put(d, &rootEntry{kind: tar.TypeDir, mode: 0o755})
	}
}

// AddPath adds the host path p at the same place: a file, or a directory
// with everything below it. Every symbolic link on the way, in p itself or
// in its parent directories, is added as a link and followed, so the path
// resolves inside the container as it does here.
func (r *Rootfs) AddPath(p string) error {
	return r.addPath(p, 0)
}

func (r *Rootfs) addPath(p string, depth int) error {
	if depth > maxLinks {
		return fmt.Errorf("rootfs: too many symbolic links at %s", p)
	}
	if !filepath.IsAbs(p) {
		return fmt.Errorf("rootfs: %s is not an absolute path", p)
	}
	parts := strings.Split(strings.TrimPrefix(filepath.Clean(p), "/"), "/")
	cur := "/"
	for i, part := range parts {
		next := filepath.Join(cur, part)
		fi, err := os.Lstat(next)
		if err != nil {
			return fmt.Errorf("rootfs: %w", err)
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(next)
			if err != nil {
				return fmt.Errorf("rootfs: %w", err)
			}
			if e, ok := r.entries[next]; !ok || e.kind != tar.TypeSymlink {
				r.addParents(next)
				r.put(next, &rootEntry{kind: tar.TypeSymlink, link: target, mode: 0o777})
			}
			abs := target
			if !filepath.IsAbs(abs) {
				abs = filepath.Join(cur, target)
			}
			rest := filepath.Join(append([]string{abs}, parts[i+1:]...)...)
			return r.addPath(rest, depth+1)
		case i < len(parts)-1:
			if _, ok := r.entries[next]; !ok {
				r.addParents(next)
				r.put(next, &rootEntry{kind: tar.TypeDir, mode: dirMode(fi.Mode())})
			}
			cur = next
		case fi.IsDir():
			return r.addTree(next, depth)
		case fi.Mode().IsRegular():
			r.addParents(next)
			r.put(next, &rootEntry{kind: tar.TypeReg, src: next, mode: fi.Mode().Perm(), size: fi.Size(), mtime: fi.ModTime()})
			return nil
		default:
			return nil // devices, sockets, fifos: not part of an image
		}
	}
	return nil
}

// addTree adds the directory dir and everything below it; links inside are
// added and followed.
func (r *Rootfs) addTree(dir string, depth int) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if _, ok := r.entries[p]; ok && d.IsDir() && p != dir {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			if _, ok := r.entries[p]; ok {
				return nil
			}
			if err := r.addPath(p, depth+1); err != nil {
				// A dangling link is kept as it is, as on the host.
				target, lerr := os.Readlink(p)
				if lerr != nil {
					return err
				}
				r.put(p, &rootEntry{kind: tar.TypeSymlink, link: target, mode: 0o777})
			}
		case d.IsDir():
			r.addParents(p)
			r.put(p, &rootEntry{kind: tar.TypeDir, mode: dirMode(fi.Mode())})
		case fi.Mode().IsRegular():
			r.addParents(p)
			r.put(p, &rootEntry{kind: tar.TypeReg, src: p, mode: fi.Mode().Perm(), size: fi.Size(), mtime: fi.ModTime()})
		}
		return nil
	})
}

// AddLibs adds the shared libraries that bin needs, as ldd(1) lists them,
// with the dynamic loader. A statically linked bin needs none. Libraries
// ldd cannot find are returned by name; the caller decides whether they
// matter (a JRE's optional GUI libraries do not).
func (r *Rootfs) AddLibs(ctx context.Context, bin string) (missing []string, err error) {
	if static, err := IsStatic(bin); err != nil {
		return nil, err
	} else if static {
		return nil, nil
	}
	out, err := exec.CommandContext(ctx, "ldd", bin).Output()
	if err != nil {
		return nil, fmt.Errorf("rootfs: ldd %s: %w", bin, err)
	}
	libs, missing := ParseLdd(out)
	for _, l := range libs {
		if err := r.AddPath(l); err != nil {
			return missing, err
		}
	}
	return missing, nil
}

// AddProgram adds the host's program at path bin (absolute) with what
// it links against: the program, the file its links resolve to, and
// every library AddLibs finds for that file, all of which must be there;
// a missing library is an error that names prefix, the program and the
// libraries.
func (r *Rootfs) AddProgram(ctx context.Context, prefix, bin string) error {
	if err := r.AddPath(bin); err != nil {
		return err
	}
	real, err := filepath.EvalSymlinks(bin)
	if err != nil {
		return err
	}
	if missing, err := r.AddLibs(ctx, real); err != nil {
		return err
	} else if len(missing) > 0 {
		return fmt.Errorf("%s: %s needs libraries this host lacks: %s", prefix, real, strings.Join(missing, ", "))
	}
	return nil
}

// ParseLdd reads ldd(1)'s output: the paths of the libraries and loader it
// found, and the names of those it did not.
func ParseLdd(out []byte) (paths, missing []string) {
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		name, rest, arrow := strings.Cut(line, "=>")
		switch {
		case arrow && strings.Contains(rest, "not found"):
			missing = append(missing, strings.TrimSpace(name))
		case arrow:
			f := strings.Fields(rest)
			if len(f) > 0 && strings.HasPrefix(f[0], "/") {
				paths = append(paths, f[0])
			}
		case strings.HasPrefix(line, "/"):
			paths = append(paths, strings.Fields(line)[0])
		}
	}
	return paths, missing
}

// IsStatic reports whether the ELF file bin (an executable or a shared
// library) needs no dynamic loader and no shared library: it has no
// program interpreter and names no library it needs.
func IsStatic(bin string) (bool, error) {
	f, err := elf.Open(bin)
	if err != nil {
		return false, fmt.Errorf("rootfs: %s: %w", bin, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return false, nil
		}
	}
	libs, err := f.ImportedLibraries()
	if err != nil {
		return false, fmt.Errorf("rootfs: %s: %w", bin, err)
	}
	return len(libs) == 0, nil
}

// AddJars adds the jar files jars (absolute paths) and, recursively, every
// jar their manifests' Class-Path names by absolute path, as Debian's jars
// do. Jars named but missing are returned.
func (r *Rootfs) AddJars(jars []string) (missing []string, err error) {
	seen := map[string]bool{}
	todo := append([]string{}, jars...)
	for len(todo) > 0 {
		j := todo[0]
		todo = todo[1:]
		if seen[j] {
			continue
		}
		seen[j] = true
		if _, err := os.Stat(j); err != nil {
			missing = append(missing, j)
			continue
		}
		if err := r.AddPath(j); err != nil {
			return missing, err
		}
		cp, err := manifestClassPath(j)
		if err != nil {
			return missing, err
		}
		for _, c := range cp {
			c = strings.TrimPrefix(c, "file:")
			if !filepath.IsAbs(c) {
				c = filepath.Join(filepath.Dir(j), c)
			}
			todo = append(todo, c)
		}
	}
	return missing, nil
}

// manifestClassPath returns the Class-Path entries of a jar's manifest.
func manifestClassPath(jar string) ([]string, error) {
	z, err := zip.OpenReader(jar)
	if err != nil {
		return nil, fmt.Errorf("rootfs: %s: %w", jar, err)
	}
	defer z.Close()
	for _, f := range z.File {
		if f.Name != "META-INF/MANIFEST.MF" {
			continue
		}
		rc, err := f.Open()
		if err != nil {
			return nil, err
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return nil, err
		}
		return parseClassPath(b), nil
	}
	return nil, nil
}

// parseClassPath reads the Class-Path attribute of a manifest, whose long
// lines continue on lines that start with one space.
func parseClassPath(manifest []byte) []string {
	var logical []string
	for _, l := range strings.Split(strings.ReplaceAll(string(manifest), "\r\n", "\n"), "\n") {
		if strings.HasPrefix(l, " ") && len(logical) > 0 {
			logical[len(logical)-1] += l[1:]
			continue
		}
		logical = append(logical, l)
	}
	for _, l := range logical {
		if v, ok := strings.CutPrefix(l, "Class-Path:"); ok {
			return strings.Fields(v)
		}
	}
	return nil
}

// Hash identifies the rootfs's content by every path, kind, mode, link
// target, size and modification time (not by reading the files, except
// those of AddHostFile): a package upgrade on the host changes it.
func (r *Rootfs) Hash() string {
	h := sha256.New()
	for _, p := range r.Paths() {
		e := r.entries[p]
		fmt.Fprintf(h, "%s\x00%c\x00%o\x00%s\x00%d\x00%d\x00", p, e.kind, e.mode, e.link, e.size, e.mtime.UnixNano())
		switch {
		case e.kind == tar.TypeReg && e.src == "":
			h.Write(e.data)
		case e.byContent:
			sum, err := FileHash(e.src)
			if err != nil {
				sum = "unreadable"
			}
			io.WriteString(h, sum)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Size returns the total size of the rootfs's regular files.
func (r *Rootfs) Size() int64 {
	var n int64
	for _, e := range r.entries {
		n += e.size
	}
	return n
}

// WriteTar writes the rootfs as a tar stream, parents before children,
// owned by root.
func (r *Rootfs) WriteTar(w io.Writer) error {
	tw := tar.NewWriter(w)
	for _, p := range r.Paths() {
		e := r.entries[p]
		hdr := &tar.Header{Name: strings.TrimPrefix(p, "/"), Typeflag: e.kind, Mode: unixMode(e.mode),
			ModTime: e.mtime, Uname: "root", Gname: "root", Format: tar.FormatPAX}
		switch e.kind {
		case tar.TypeDir:
			hdr.Name += "/"
		case tar.TypeSymlink:
			hdr.Linkname = e.link
		case tar.TypeReg:
			hdr.Size = e.size
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if e.kind != tar.TypeReg {
			continue
		}
		if e.src == "" {
			if _, err := tw.Write(e.data); err != nil {
				return err
			}
			continue
		}
		if err := copyN(tw, e.src, e.size); err != nil {
			return err
		}
	}
	return tw.Close()
}

// dirMode keeps a host directory's permissions and its sticky bit (/tmp).
func dirMode(m fs.FileMode) fs.FileMode {
	return m & (fs.ModePerm | fs.ModeSticky)
}

// unixMode converts m's permission and special bits to their Unix values.
func unixMode(m fs.FileMode) int64 {
	u := int64(m.Perm())
	if m&fs.ModeSetuid != 0 {
		u |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		u |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		u |= 0o1000
	}
	return u
}

// copyN copies exactly n bytes of the file src to w: the size the header
// announced, even if the file changed meanwhile.
func copyN(w io.Writer, src string, n int64) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	c, err := io.Copy(w, io.LimitReader(f, n))
	if err != nil {
		return err
	}
	if c < n {
		return fmt.Errorf("rootfs: %s shrank while being read", src)
	}
	return nil
}
