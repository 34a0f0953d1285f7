package images

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/locktest/locktest/testkit/gate"
)

func TestParseLdd(t *testing.T) {
	for _, tc := range []struct {
		name          string
		out           string
		paths, missed []string
	}{
		{"dynamic", "\tlinux-vdso.so.1 (0x00007ffd)\n\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f)\n\t/lib64/ld-linux-x86-64.so.2 (0x00007f)\n",
			[]string{"/lib/x86_64-linux-gnu/libc.so.6", "/lib64/ld-linux-x86-64.so.2"}, nil},
		{"missing", "\tlibX11.so.6 => not found\n\tlibm.so.6 => /lib/x86_64-linux-gnu/libm.so.6 (0x1)\n",
			[]string{"/lib/x86_64-linux-gnu/libm.so.6"}, []string{"libX11.so.6"}},
		{"static", "\tnot a dynamic executable\n", nil, nil},
		{"statically linked", "\tstatically linked\n", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, m := ParseLdd([]byte(tc.out))
			if !slices.Equal(p, tc.paths) || !slices.Equal(m, tc.missed) {
				t.Errorf("got %q, missing %q; want %q, %q", p, m, tc.paths, tc.missed)
			}
		})
	}
}

func TestParseClassPath(t *testing.T) {
	for _, tc := range []struct {
		name, manifest string
		want           []string
	}{
		{"continued lines", "Manifest-Version: 1.0\r\nClass-Path: /usr/share/java/a.jar /usr/share/j\r\n ava/b.jar\r\nCreated-By: x\r\n",
			[]string{"/usr/share/java/a.jar", "/usr/share/java/b.jar"}},
		{"none", "Manifest-Version: 1.0\n", nil},
		{"relative", "Class-Path: lib/c.jar\n", []string{"lib/c.jar"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := parseClassPath([]byte(tc.manifest)); !slices.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// tarEntries reads a tar stream into name → (type, link or content).
func tarEntries(t *testing.T, r *Rootfs) map[string]string {
	t.Helper()
	var b bytes.Buffer
	if err := r.WriteTar(&b); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	tr := tar.NewReader(&b)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			out[h.Name] = "dir " + strconv.FormatInt(h.Mode, 8)
		case tar.TypeSymlink:
			out[h.Name] = "link " + h.Linkname
		case tar.TypeReg:
			c, _ := io.ReadAll(tr)
			out[h.Name] = "file " + string(c)
		}
	}
}

// TestAddPathKeepsLinksAndTheirTargets builds, in a temporary directory, a
// host layout like Debian's merged /usr (lib -> usr/lib) with a versioned
// library behind a link and a directory with a link leading out of it, and
// checks the rootfs holds every link as a link and every target.
func TestAddPathKeepsLinksAndTheirTargets(t *testing.T) {
	root := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(root, "usr/lib/x86_64"), 0o755))
	must(os.WriteFile(filepath.Join(root, "usr/lib/x86_64/libfoo.so.1.2"), []byte("foo"), 0o644))
	must(os.Symlink("libfoo.so.1.2", filepath.Join(root, "usr/lib/x86_64/libfoo.so.1")))
	must(os.Symlink("usr/lib", filepath.Join(root, "lib")))
	must(os.MkdirAll(filepath.Join(root, "etc/app"), 0o755))
	must(os.WriteFile(filepath.Join(root, "etc/app/app.cfg"), []byte("cfg"), 0o644))
	must(os.MkdirAll(filepath.Join(root, "opt/app/conf"), 0o755))
	must(os.Symlink(filepath.Join(root, "etc/app/app.cfg"), filepath.Join(root, "opt/app/conf/app.cfg")))
	must(os.Symlink(filepath.Join(root, "nowhere"), filepath.Join(root, "opt/app/dangling")))

	var r Rootfs
	must(r.AddPath(filepath.Join(root, "lib/x86_64/libfoo.so.1")))
	must(r.AddPath(filepath.Join(root, "opt/app")))
	r.AddDir("/tmp", os.ModeSticky|0o777)
	got := tarEntries(t, &r)
	rel := func(p string) string { return filepath.Join(root, p)[1:] }
	for p, want := range map[string]string{
		rel("lib"):                          "link usr/lib",
		rel("usr/lib/x86_64/libfoo.so.1"):   "link libfoo.so.1.2",
		rel("usr/lib/x86_64/libfoo.so.1.2"): "file foo",
		rel("opt/app/conf/app.cfg"):         "link " + filepath.Join(root, "etc/app/app.cfg"),
		rel("etc/app/app.cfg"):              "file cfg",
		rel("opt/app/dangling"):             "link " + filepath.Join(root, "nowhere"),
		"tmp/":                              "dir 1777",
		rel("usr/lib/x86_64") + "/":         "dir 755",
	} {
		if got[p] != want {
			t.Errorf("%s: got %q, want %q", p, got[p], want)
		}
	}
	h1 := r.Hash()
	must(os.WriteFile(filepath.Join(root, "etc/app/app.cfg"), []byte("cfg, changed"), 0o644))
	var r2 Rootfs
	must(r2.AddPath(filepath.Join(root, "lib/x86_64/libfoo.so.1")))
	must(r2.AddPath(filepath.Join(root, "opt/app")))
	r2.AddDir("/tmp", os.ModeSticky|0o777)
	if r2.Hash() == h1 {
		t.Error("the hash did not change with a file's content")
	}
}

func TestAddJarsFollowsManifests(t *testing.T) {
	dir := t.TempDir()
	jar := func(name, classPath string) string {
		p := filepath.Join(dir, name)
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		z := zip.NewWriter(f)
		w, _ := z.Create("META-INF/MANIFEST.MF")
		io.WriteString(w, "Manifest-Version: 1.0\nClass-Path: "+classPath+"\n")
		z.Close()
		f.Close()
		return p
	}
	a := jar("a.jar", filepath.Join(dir, "b.jar")+" c.jar "+filepath.Join(dir, "gone.jar"))
	jar("b.jar", "c.jar")
	jar("c.jar", "")
	var r Rootfs
	missing, err := r.AddJars([]string{a})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range []string{"a.jar", "b.jar", "c.jar"} {
		if !r.Has(filepath.Join(dir, j)) {
			t.Errorf("%s not added", j)
		}
	}
	if !slices.Equal(missing, []string{filepath.Join(dir, "gone.jar")}) {
		t.Errorf("missing %q", missing)
	}
}

// The redis image's rootfs holds the server, its loader and libraries, as
// ldd lists them on this host.
func TestRedisRootfsHasTheServerAndItsLibraries(t *testing.T) {
	gate.Need(t, "redis-server")
	r, err := ProgramsRootfs(context.Background(), "redis", []string{"redis-server"})
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("ldd", "/usr/bin/redis-server").Output()
	if err != nil {
		t.Fatal(err)
	}
	libs, _ := ParseLdd(out)
	for _, p := range append(libs, "/usr/bin/redis-server", "/tmp", "/data", "/etc/passwd") {
		if !r.Has(p) {
			t.Errorf("rootfs lacks %s", p)
		}
	}
	if r.Hash() != func() string {
		r2, _ := ProgramsRootfs(context.Background(), "redis", []string{"redis-server"})
		return r2.Hash()
	}() {
		t.Error("two assemblies of the same host files hash differently")
	}
}
