package docker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/moby/moby/client"
)

// DefaultImages are the official images each backend runs when the run
// names no other and locktest built none (`locktest images build`).
// They are keyed by image (ImageOf), and only locktest's own are tried
// with the SQL servers' (whose official images start through their own
// entrypoint scripts, which the provider does not run).
var DefaultImages = map[string]string{
	"redis":     "redis:7.2",
	"etcd":      "gcr.io/etcd-development/etcd:v3.5.21",
	"zookeeper": "zookeeper:3.9",
	"mariadb":   "mariadb:11.8",
	"postgres":  "postgres:17",
}

// Images returns the images locktest builds, one for each server program:
// the names ImageOf gives the backends, sorted.
func Images() []string {
	var out []string
	for _, b := range Backends() {
		if im := ImageOf(b); !slices.Contains(out, im) {
			out = append(out, im)
		}
	}
	sort.Strings(out)
	return out
}

// Image is the image a backend's nodes run.
type Image struct {
	// Backend is the backend it serves.
	Backend string
	// Ref is the image's name and tag (or id).
	Ref string
	// Built is set for an image locktest built (LabelImage).
	Built bool
	// NodeProgram is set for an image whose entrypoint is locktest's own
	// node program (LabelNodeProgram), which takes locktest's flags.
	NodeProgram bool
}

// ResolveImage returns the image backend's nodes run: override when the
// run names one (--image backend=ref), else the newest image locktest built
// for it (ImageOf), else the official image (DefaultImages), which the
// start pulls if the engine lacks it.
func (e *Engine) ResolveImage(ctx context.Context, backend, override string) (Image, error) {
	if !slices.Contains(Backends(), backend) {
		return Image{}, fmt.Errorf("docker provider: no backend %q (it runs %s)", backend, strings.Join(Backends(), ", "))
	}
	img := Image{Backend: backend, Ref: override}
	if override == "" {
		built, err := e.builtImages(ctx, ImageOf(backend))
		if err != nil {
			return Image{}, err
		}
		if len(built) > 0 {
			img.Ref = built[0].Ref
		} else {
			img.Ref = DefaultImages[ImageOf(backend)]
		}
	}
	res, err := e.cli.ImageInspect(ctx, img.Ref)
	if err != nil {
		if isNotFound(err) {
			return img, nil // the start pulls it, or says how to get it
		}
		return Image{}, fmt.Errorf("docker: inspect image %s: %s", img.Ref, firstLine(err))
	}
	if res.Config != nil {
		img.Built = res.Config.Labels[LabelImage] == "1"
		img.NodeProgram = res.Config.Labels[LabelNodeProgram] != ""
	}
	return img, nil
}

// BuiltImage is an image locktest built, as listed by ListBuilt.
type BuiltImage struct {
	Backend string
	Ref     string
	ID      string
	Hash    string
	Size    int64
	Created time.Time
	// Reused is set when BuildImages found the image already built from
	// the same inputs.
	Reused bool
	// Took is how long BuildImages spent on it.
	Took time.Duration
}

// ListBuilt returns the images locktest built, newest first.
func (e *Engine) ListBuilt(ctx context.Context) ([]BuiltImage, error) {
	return e.builtImages(ctx, "")
}

// builtImages lists the images labelled LabelImage (of backend, unless it
// is ""), newest first, one entry per tag.
func (e *Engine) builtImages(ctx context.Context, backend string) ([]BuiltImage, error) {
	f := client.Filters{}.Add("label", LabelImage+"=1")
	if backend != "" {
		f = f.Add("label", LabelBackend+"="+backend)
	}
	res, err := e.cli.ImageList(ctx, client.ImageListOptions{Filters: f})
	if err != nil {
		return nil, fmt.Errorf("docker: list images: %s", firstLine(err))
	}
	var out []BuiltImage
	for _, im := range res.Items {
		for _, tag := range im.RepoTags {
			out = append(out, BuiltImage{Backend: im.Labels[LabelBackend], Ref: tag, ID: im.ID, Hash: im.Labels[LabelHash],
				Size: im.Size, Created: time.Unix(im.Created, 0)})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Created.After(out[j].Created) })
	return out, nil
}

// BuildOptions says what BuildImages builds.
type BuildOptions struct {
	// Backends to build; empty means all.
	Backends []string
	// NodeBinary is the locktest executable the etcd image runs. Empty
	// means build one with `go build` from Source.
	NodeBinary string
	// Source is the root of locktest's module, for NodeBinary "".
	Source string
	// Force rebuilds images that exist already.
	Force bool
}

// BuildImages builds locktest's own image of each backend without pulling
// anything: a root file system assembled from this host's installed
// packages (the server's binary, the libraries ldd lists, for ZooKeeper the
// JRE and the jars) or, for etcd, from locktest's own executable alone,
// imported with `docker import` (the API's ImageImport) and tagged
// locktest/<backend>:<tag>. The images carry LabelImage, LabelBackend and
// LabelHash, the hash of their inputs: an image whose inputs did not change
// is reused, not rebuilt. A newer build of a backend replaces the older
// images locktest built for it.
func (e *Engine) BuildImages(ctx context.Context, opts BuildOptions) ([]BuiltImage, error) {
	var todo []string
	for _, b := range opts.Backends {
		if !slices.Contains(Backends(), b) && !slices.Contains(Images(), b) {
			return nil, fmt.Errorf("images build: no backend %q (known: %s)", b, strings.Join(Backends(), ", "))
		}
		if im := ImageOf(b); !slices.Contains(todo, im) {
			todo = append(todo, im)
		}
	}
	if len(todo) == 0 {
		todo = Images()
	}
	// Concurrent builds (test binaries of several packages) wait for each
	// other, and then find the image built.
	unlock, err := lockBuilds(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	var out []BuiltImage
	for _, b := range todo {
		t0 := time.Now()
		recipe, cleanup, err := e.recipe(ctx, b, opts)
		if err != nil {
			return out, err
		}
		bi, err := e.buildOne(ctx, b, recipe, opts.Force)
		cleanup()
		if err != nil {
			return out, err
		}
		bi.Took = time.Since(t0)
		e.log.Info("image ready", "backend", b, "image", bi.Ref, "reused", bi.Reused, "size", bi.Size, "took", bi.Took.Round(time.Millisecond))
		out = append(out, bi)
	}
	return out, nil
}

// imagePath is the PATH of every image.
const imagePath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// imageRecipe is what one image is made of.
type imageRecipe struct {
	fs      *Rootfs
	tag     string // locktest/<backend>:<tag>; "" means the hash
	changes []string
	labels  map[string]string
}

// recipe assembles the root file system of backend's image.
func (e *Engine) recipe(ctx context.Context, backend string, opts BuildOptions) (*imageRecipe, func(), error) {
	switch backend {
	case "mariadb", "postgres":
		r, err := SQLRootfs(ctx, backend)
		changes := []string{"WORKDIR /data"}
		if best, _ := highestPostgres(); backend == "postgres" && best != "" {
			// initdb and postgres live in their version's directory.
			changes = append(changes, "ENV PATH="+filepath.Dir(best)+":"+imagePath)
		}
		return &imageRecipe{fs: r, tag: "host", changes: changes}, func() {}, err
	case "redis":
		r, err := RedisRootfs(ctx)
		return &imageRecipe{fs: r, tag: "host", changes: []string{"WORKDIR /data", `CMD ["redis-server"]`}}, func() {}, err
	case "zookeeper":
		r, err := ZooKeeperRootfs(ctx)
		return &imageRecipe{fs: r, tag: "host", changes: []string{"WORKDIR /data", `CMD ["java", "-version"]`}}, func() {}, err
	case "etcd":
		bin, cleanup := opts.NodeBinary, func() {}
		if bin == "" {
			b, c, err := buildNodeBinary(ctx, opts.Source)
			if err != nil {
				return nil, func() {}, err
			}
			bin, cleanup = b, c
		}
		r, err := EtcdRootfs(ctx, bin)
		return &imageRecipe{fs: r, changes: []string{"WORKDIR /data", `ENTRYPOINT ["/locktest", "node", "etcd"]`},
			labels: map[string]string{LabelNodeProgram: "etcd"}}, cleanup, err
	}
	return nil, func() {}, fmt.Errorf("images build: no recipe for %s", backend)
}

// buildOne imports recipe as backend's image unless an image of the same
// inputs exists.
func (e *Engine) buildOne(ctx context.Context, backend string, rc *imageRecipe, force bool) (BuiltImage, error) {
	hash := rc.fs.Hash()
	tag := rc.tag
	if tag == "" {
		tag = hash[:12]
	}
	ref := "locktest/" + backend + ":" + tag
	existing, err := e.builtImages(ctx, backend)
	if err != nil {
		return BuiltImage{}, err
	}
	for _, x := range existing {
		if x.Ref == ref && x.Hash == hash && !force {
			x.Reused = true
			return x, nil
		}
	}
	labels := map[string]string{LabelImage: "1", LabelBackend: backend, LabelHash: hash}
	for k, v := range rc.labels {
		labels[k] = v
	}
	changes := []string{"ENV PATH=" + imagePath}
	changes = append(changes, rc.changes...)
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		changes = append(changes, fmt.Sprintf("LABEL %s=%q", k, labels[k]))
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(rc.fs.WriteTar(pw)) }()
	res, err := e.cli.ImageImport(ctx, client.ImageImportSource{Source: pr, SourceName: "-"}, ref,
		client.ImageImportOptions{Changes: changes, Message: "built by locktest images build"})
	if err != nil {
		pr.CloseWithError(err)
		return BuiltImage{}, fmt.Errorf("images build %s: docker import: %s", backend, firstLine(err))
	}
	msg, rerr := io.ReadAll(res)
	res.Close()
	pr.Close()
	if rerr != nil {
		return BuiltImage{}, fmt.Errorf("images build %s: docker import: %v", backend, rerr)
	}
	if strings.Contains(string(msg), `"error"`) {
		return BuiltImage{}, fmt.Errorf("images build %s: docker import: %s", backend, strings.TrimSpace(string(msg)))
	}
	now, err := e.builtImages(ctx, backend)
	if err != nil {
		return BuiltImage{}, err
	}
	var fresh *BuiltImage
	for i, x := range now {
		if x.Ref == ref {
			fresh = &now[i]
		}
	}
	if fresh == nil {
		return BuiltImage{}, fmt.Errorf("images build %s: %s not found after the import", backend, ref)
	}
	// The older images of this backend are superseded: remove those that
	// locktest built (the tag moved away from one, or another tag) unless
	// a container still uses them.
	for _, x := range existing {
		if x.ID == fresh.ID {
			continue
		}
		target := x.Ref
		if x.Ref == ref {
			target = x.ID // untagged by the import
		}
		if _, err := e.cli.ImageRemove(ctx, target, client.ImageRemoveOptions{}); err != nil {
			e.log.Debug("keep older image", "image", target, "err", firstLine(err))
		}
	}
	return *fresh, nil
}

// baseRootfs returns the directories and files every image has: /tmp,
// /data, /conf, and an /etc/passwd and /etc/group naming root.
func baseRootfs() *Rootfs {
	r := &Rootfs{}
	r.AddDir("/tmp", fs.ModeSticky|0o777)
	r.AddDir("/data", 0o755)
	r.AddDir("/conf", 0o755)
	r.AddFile("/etc/passwd", []byte("root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n"), 0o644)
	r.AddFile("/etc/group", []byte("root:x:0:\nnogroup:x:65534:\n"), 0o644)
	r.AddDir("/root", 0o700)
	return r
}

// RedisRootfs assembles a Redis image from the host's redis-server (Debian
// package redis-server) and its libraries.
func RedisRootfs(ctx context.Context) (*Rootfs, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, errors.New("images build redis: redis-server is not installed on this host: run `make setup`, or give the provider another image with --image redis=REF")
	}
	bin, _ = filepath.Abs(bin)
	r := baseRootfs()
	if err := r.AddProgram(ctx, "images build redis", bin); err != nil {
		return nil, err
	}
	return r, nil
}

// zkJars are the jars of ZooKeeper's class path in Debian's package, the
// local provider's; zookeeper.jar's manifest names the rest.
var zkJars = []string{"/usr/share/java/zookeeper.jar", "/usr/share/java/slf4j-log4j12.jar", "/usr/share/java/log4j-1.2.jar"}

// jreSkip are the parts of a JDK directory a server does not need.
var jreSkip = []string{"jmods", "include", "man", "legal", "docs", "demo", "src.zip"}

// ZooKeeperRootfs assembles a ZooKeeper image from the host's Java runtime
// (the directory `java` resolves into, without the JDK's development
// parts), the libraries of its binaries, and Debian's ZooKeeper jars.
func ZooKeeperRootfs(ctx context.Context) (*Rootfs, error) {
	const setup = "run `make setup` (installs zookeeper and a Java runtime), or give the provider another image with --image zookeeper=REF"
	r := baseRootfs()
	switch err := addZooKeeper(ctx, r); {
	case errors.Is(err, errNoJava):
		return nil, errors.New("images build zookeeper: java is not installed on this host: " + setup)
	case errors.Is(err, errNoZooKeeperJars):
		return nil, errors.New("images build zookeeper: the ZooKeeper jars are not installed on this host: " + setup)
	case err != nil:
		return nil, err
	}
	return r, nil
}

// The ZooKeeper parts this host may lack.
var (
	errNoJava          = errors.New("java is not installed on this host")
	errNoZooKeeperJars = errors.New("the ZooKeeper jars are not installed on this host")
)

// addZooKeeper adds to r what runs a ZooKeeper peer: the host's Java
// runtime (the directory `java` resolves into, without the JDK's
// development parts), the libraries of its binaries, and Debian's
// ZooKeeper jars with the jars their manifests name. A host without java
// or the jars gives errNoJava or errNoZooKeeperJars.
func addZooKeeper(ctx context.Context, r *Rootfs) error {
	java, err := exec.LookPath("java")
	if err != nil {
		return errNoJava
	}
	java, _ = filepath.Abs(java)
	realJava, err := filepath.EvalSymlinks(java)
	if err != nil {
		return err
	}
	home := filepath.Dir(filepath.Dir(realJava)) // <home>/bin/java
	if err := r.AddPath(java); err != nil {
		return err
	}
	entries, err := os.ReadDir(home)
	if err != nil {
		return err
	}
	for _, d := range entries {
		if slices.Contains(jreSkip, d.Name()) {
			continue
		}
		if err := r.AddPath(filepath.Join(home, d.Name())); err != nil {
			return err
		}
	}
	// The java launcher and every library of the runtime (libjvm.so, the
	// ones it loads with dlopen) with what they link against.
	var bins []string
	_ = filepath.WalkDir(home, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() && slices.Contains(jreSkip, d.Name()) {
			return filepath.SkipDir
		}
		if d.Type().IsRegular() && (strings.HasSuffix(p, ".so") || p == realJava) {
			bins = append(bins, p)
		}
		return nil
	})
	for _, b := range bins {
		// A library of the JDK's GUI may need X11 libraries the host lacks;
		// a server never loads it.
		if _, err := r.AddLibs(ctx, b); err != nil {
			return err
		}
	}
	if missing, err := r.AddJars(zkJars); err != nil {
		return err
	} else if slices.ContainsFunc(missing, func(m string) bool { return slices.Contains(zkJars, m) }) {
		return errNoZooKeeperJars
	}
	return nil
}

// EtcdRootfs assembles the etcd image: locktest's own executable bin at
// /locktest, whose `node etcd` command embeds the etcd server, and, when
// bin is not statically linked, the libraries it needs.
func EtcdRootfs(ctx context.Context, bin string) (*Rootfs, error) {
	r := baseRootfs()
	if err := r.AddHostFile("/locktest", bin); err != nil {
		return nil, fmt.Errorf("images build etcd: %w", err)
	}
	if _, err := r.AddLibs(ctx, bin); err != nil {
		return nil, fmt.Errorf("images build etcd: %w", err)
	}
	return r, nil
}

// buildNodeBinary builds a locktest executable from the module at
// src (found from the working directory when src is "") into a temporary
// directory, which the returned function removes.
func buildNodeBinary(ctx context.Context, src string) (string, func(), error) {
	if src == "" {
		s, err := ModuleRoot()
		if err != nil {
			return "", func() {}, err
		}
		src = s
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		if p := filepath.Join(os.Getenv("GOROOT"), "bin", "go"); os.Getenv("GOROOT") != "" {
			goBin = p
		} else {
			return "", func() {}, errors.New("images build etcd: building locktest for the image needs the go command in PATH")
		}
	}
	tmp, err := os.MkdirTemp("", "locktest-image-")
	if err != nil {
		return "", func() {}, err
	}
	cleanup := func() { os.RemoveAll(tmp) }
	out := filepath.Join(tmp, "locktest")
	// The build settings are those of `go test` (no -trimpath, cgo as the
	// host has it), so that the packages it compiled are reused from the
	// build cache; a binary that links libc gets its libraries in the image.
	cmd := exec.CommandContext(ctx, goBin, "build", "-buildvcs=false", "-o", out, "./cmd/locktest")
	cmd.Dir = src
	if msg, err := cmd.CombinedOutput(); err != nil {
		cleanup()
		return "", func() {}, fmt.Errorf("images build etcd: go build in %s: %v: %s", src, err, strings.TrimSpace(string(msg)))
	}
	return out, cleanup, nil
}

// ModuleRoot finds the root of locktest's module from the working
// directory upwards.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		b, err := os.ReadFile(filepath.Join(d, "go.mod"))
		if err == nil && strings.Contains(string(b), "module github.com/locktest/locktest\n") {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("images build etcd: %s is not inside locktest's source tree", dir)
		}
	}
}

// lockBuilds takes a host-wide lock that serialises image builds, waiting
// for it until ctx ends.
func lockBuilds(ctx context.Context) (func(), error) {
	p := filepath.Join(os.TempDir(), "locktest-images.lock")
	f, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("images build: %w", err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("images build: lock %s: %w", p, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("images build: waiting for another build (%s): %w", p, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// FileHash returns the sha256 of a file, hex-encoded.
func FileHash(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
