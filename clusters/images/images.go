// Package images builds locktest's own container images, which the docker
// provider (clusters/docker) runs, and resolves the image a backend's nodes
// run. Images are the official ones by name and tag unless the run names
// others or locktest built its own with [Build] (`locktest images
// build`), from the host's installed packages without pulling anything: a
// root file system ([Rootfs]) assembled from this host's files, imported
// into the Docker engine (clusters/engine) and labelled so that a build
// whose inputs did not change reuses the image.
package images

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/moby/moby/client"

	"github.com/locktest/locktest/clusters/backend"
	"github.com/locktest/locktest/clusters/engine"
)

// Official returns the official image, name:tag, that the nodes whose
// image is called image (Of) run when the run names no other and
// locktest built none (`locktest images build`): the kind's
// (backend.Image.Official), "" for none. Only locktest's own are tried
// with the SQL servers' (whose official images start through their own
// entrypoint scripts, which the provider does not run).
func Official(image string) string {
	if k, err := backend.KindOf(image); err == nil {
		return k.Image.Official
	}
	return ""
}

// Names returns the images locktest builds, one for each server program:
// the names Of gives the backends, sorted.
func Names() []string {
	var out []string
	for _, b := range backend.All() {
		if im := Of(b); !slices.Contains(out, im) {
			out = append(out, im)
		}
	}
	sort.Strings(out)
	return out
}

// Of returns the image a backend's nodes run, by locktest's name for
// it (locktest/<name>): the three Redis backends share redis's, mysql runs
// mariadb's.
func Of(b string) string { return backend.ImageOf(b) }

// Image is the image a backend's nodes run.
type Image struct {
	// Backend is the backend it serves.
	Backend string
	// Ref is the image's name and tag (or id).
	Ref string
	// Built is set for an image locktest built (engine.LabelImage).
	Built bool
	// NodeProgram is set for an image whose entrypoint is locktest's own
	// node program (engine.LabelNodeProgram), which takes locktest's flags.
	NodeProgram bool
}

// Resolve returns the image backend b's nodes run on the engine e: override
// when the run names one (--image backend=ref), else the newest image
// locktest built for it (Of), else the official image (Official), which
// the start pulls if the engine lacks it.
func Resolve(ctx context.Context, e *engine.Engine, b, override string) (Image, error) {
	if !slices.Contains(backend.All(), b) {
		return Image{}, fmt.Errorf("docker provider: no backend %q (there are %s)", b, strings.Join(backend.All(), ", "))
	}
	img := Image{Backend: b, Ref: override}
	if override == "" {
		built, err := builtImages(ctx, e, Of(b))
		if err != nil {
			return Image{}, err
		}
		switch {
		case len(built) > 0:
			img.Ref = built[0].Ref
		case Official(Of(b)) != "":
			img.Ref = Official(Of(b))
		default:
			return Image{}, fmt.Errorf("docker: %s has no image: its servers run in locktest's node program, whose image locktest builds (locktest images build %s)", b, Of(b))
		}
	}
	res, err := e.Client().ImageInspect(ctx, img.Ref)
	if err != nil {
		if engine.IsNotFound(err) {
			return img, nil // the start pulls it, or says how to get it
		}
		return Image{}, fmt.Errorf("docker: inspect image %s: %s", img.Ref, engine.FirstLine(err))
	}
	if res.Config != nil {
		img.Built = res.Config.Labels[engine.LabelImage] == "1"
		img.NodeProgram = res.Config.Labels[engine.LabelNodeProgram] != ""
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
	// Reused is set when Build found the image already built from the
	// same inputs.
	Reused bool
	// Took is how long Build spent on it.
	Took time.Duration
	// Skipped says why Build, asked for every image, left this one out: a
	// server locktest builds itself that this host has not built
	// (NotBuilt). Nothing else of the image is set then.
	Skipped string
}

// NotBuilt says why the image called image cannot be built on this host
// although nothing is wrong: its kind runs a program that locktest builds
// itself and this host has not built (backend.Kind.NotBuilt, which names
// the make target). "" otherwise.
func NotBuilt(image string) string {
	if k, err := backend.KindOf(image); err == nil {
		return k.NotBuilt()
	}
	return ""
}

// ListBuilt returns the images locktest built on the engine e, newest
// first.
func ListBuilt(ctx context.Context, e *engine.Engine) ([]BuiltImage, error) {
	return builtImages(ctx, e, "")
}

// builtImages lists the images labelled engine.LabelImage (of backend,
// unless it is ""), newest first, one entry per tag.
func builtImages(ctx context.Context, e *engine.Engine, backend string) ([]BuiltImage, error) {
	f := client.Filters{}.Add("label", engine.LabelImage+"=1")
	if backend != "" {
		f = f.Add("label", engine.LabelBackend+"="+backend)
	}
	res, err := e.Client().ImageList(ctx, client.ImageListOptions{Filters: f})
	if err != nil {
		return nil, fmt.Errorf("docker: list images: %s", engine.FirstLine(err))
	}
	var out []BuiltImage
	for _, im := range res.Items {
		for _, tag := range im.RepoTags {
			out = append(out, BuiltImage{Backend: im.Labels[engine.LabelBackend], Ref: tag, ID: im.ID, Hash: im.Labels[engine.LabelHash],
				Size: im.Size, Created: time.Unix(im.Created, 0)})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Created.After(out[j].Created) })
	return out, nil
}

// BuildOptions says what Build builds.
type BuildOptions struct {
	// Backends to build; empty means all.
	Backends []string
	// NodeBinary is the locktest executable the images of etcd and nats run. Empty
	// means build one with `go build` from Source.
	NodeBinary string
	// Source is the root of locktest's module, for NodeBinary "".
	Source string
	// Force rebuilds images that exist already.
	Force bool
}

// Check refuses options no build can take, before any engine is asked:
// a backend (or image name) no image serves, a NodeBinary that is not an
// executable file.
func (o BuildOptions) Check() error {
	for _, b := range o.Backends {
		if !slices.Contains(backend.All(), b) && !slices.Contains(Names(), b) {
			return fmt.Errorf("images build: no backend %q (known: %s)", b, strings.Join(backend.All(), ", "))
		}
	}
	if o.NodeBinary != "" {
		if st, err := os.Stat(o.NodeBinary); err != nil || !st.Mode().IsRegular() || st.Mode()&0o111 == 0 {
			return fmt.Errorf("--node-binary %s: not an executable file", o.NodeBinary)
		}
	}
	return nil
}

// Build builds, on the engine e, locktest's own image of each backend
// without pulling anything: a root file system assembled from this host's
// installed packages (the server's binary, the libraries ldd lists, for
// ZooKeeper the JRE and the jars) or, for etcd and nats, from locktest's own
// executable alone, imported with `docker import` (the API's ImageImport)
// and tagged locktest/<backend>:<tag>. The images carry
// engine.LabelImage, engine.LabelBackend and engine.LabelHash, the hash of
// their inputs: an image whose inputs did not change is reused, not
// rebuilt. A newer build of a backend replaces the older images locktest
// built for it.
func Build(ctx context.Context, e *engine.Engine, opts BuildOptions) ([]BuiltImage, error) {
	if err := opts.Check(); err != nil {
		return nil, err
	}
	var todo []string
	for _, b := range opts.Backends {
		if im := Of(b); !slices.Contains(todo, im) {
			todo = append(todo, im)
		}
	}
	every := len(todo) == 0
	if every {
		todo = Names()
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
		if why := NotBuilt(b); every && why != "" {
			out = append(out, BuiltImage{Backend: b, Skipped: why})
			continue
		}
		t0 := time.Now()
		rc, cleanup, err := recipe(ctx, b, opts)
		if err != nil {
			return out, err
		}
		bi, err := BuildOne(ctx, e, b, rc, opts.Force)
		cleanup()
		if err != nil {
			return out, err
		}
		bi.Took = time.Since(t0)
		e.Logger().Info("image ready", "backend", b, "image", bi.Ref, "reused", bi.Reused, "size", bi.Size, "took", bi.Took.Round(time.Millisecond))
		out = append(out, bi)
	}
	return out, nil
}

// imagePath is the PATH of every image.
const imagePath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Recipe is what one image is made of.
type Recipe struct {
	// Rootfs is the image's root file system.
	Rootfs *Rootfs
	// Tag is the image's tag, locktest/<name>:<tag>; "" means the first
	// 12 digits of the Rootfs's hash.
	Tag string
	// Changes are Dockerfile instructions (`docker import --change`)
	// beside the PATH and the labels, which every image gets.
	Changes []string
	// Labels are the image's labels beside those of every built image.
	Labels map[string]string
}

// recipe assembles the root file system of the image called image, that
// of the kind of node of the same name: the kind says what the image holds
// (backend.Image), this package how it is assembled.
func recipe(ctx context.Context, image string, opts BuildOptions) (*Recipe, func(), error) {
	k, err := backend.KindOf(image)
	if err != nil {
		return nil, func() {}, fmt.Errorf("images build: no recipe for %s", image)
	}
	if k.Program == backend.NodeProgram {
		return nodeRecipe(ctx, k.Name, opts)
	}
	if k.Image.Rootfs == backend.RootfsNodePrograms {
		return nodeProgramsRecipe(ctx, k, opts)
	}
	changes := []string{"WORKDIR /data"}
	var r *Rootfs
	switch k.Image.Rootfs {
	case backend.RootfsPrograms:
		var progs []string
		for _, p := range k.Programs {
			progs = append(progs, p.Name)
		}
		r, err = ProgramsRootfs(ctx, image, progs)
	case backend.RootfsJava:
		r, err = ZooKeeperRootfs(ctx)
	case backend.RootfsMariaDB, backend.RootfsPostgres:
		r, err = SQLRootfs(ctx, k.Image.Rootfs, image)
		if best, _ := HighestPostgres(); k.Image.Rootfs == backend.RootfsPostgres && best != "" {
			// initdb and postgres live in their version's directory.
			changes = append(changes, "ENV PATH="+filepath.Dir(best)+":"+imagePath)
		}
	default:
		return nil, func() {}, fmt.Errorf("images build: no recipe for %s", image)
	}
	if len(k.Image.Cmd) > 0 {
		q := make([]string, len(k.Image.Cmd))
		for i, a := range k.Image.Cmd {
			q[i] = strconv.Quote(a)
		}
		changes = append(changes, "CMD ["+strings.Join(q, ", ")+"]")
	}
	return &Recipe{Rootfs: r, Tag: "host", Changes: changes}, func() {}, err
}

// nodeProgramsRecipe is the recipe of the image of kind k whose nodes run
// its host programs, in a cluster whose other nodes run in locktest's node
// program (backend.RootfsNodePrograms): the node image, with each of k's
// programs in /usr/local/bin, found where locktest builds it
// (backend.HostProgram.Built) or on the PATH, and its libraries.
func nodeProgramsRecipe(ctx context.Context, k *backend.Kind, opts BuildOptions) (*Recipe, func(), error) {
	rec, cleanup, err := nodeRecipe(ctx, k.Name, opts)
	if err != nil {
		return rec, cleanup, err
	}
	for _, p := range k.Programs {
		bin := ""
		if p.Built != nil {
			if b := p.Built(); isExecutable(b) {
				bin = b
			}
		}
		if bin == "" {
			b, err := exec.LookPath(p.Name)
			if err != nil {
				how := "run `make setup`"
				if p.Make != "" {
					how = "run `make " + p.Make + "`"
				}
				return rec, cleanup, fmt.Errorf("images build %s: %s is not on this host: %s, or give the provider another image with --image %s=REF", k.Name, p.Name, how, k.Name)
			}
			bin = b
		}
		if err := rec.Rootfs.AddHostFile("/usr/local/bin/"+p.Name, bin); err != nil {
			return rec, cleanup, fmt.Errorf("images build %s: %w", k.Name, err)
		}
		if missing, err := rec.Rootfs.AddLibs(ctx, bin); err != nil || len(missing) > 0 {
			return rec, cleanup, fmt.Errorf("images build %s: the libraries of %s: %v (missing %v)", k.Name, bin, err, missing)
		}
	}
	return rec, cleanup, nil
}

// AddBuiltPrograms adds to r, in /usr/local/bin, each program that
// locktest builds itself for a kind of node (backend.HostProgram.Built)
// and that this host has built, with its libraries; it returns the names
// of those it added. A program not built is left out: a host made from r
// lacks it, as the provider then says.
func AddBuiltPrograms(ctx context.Context, r *Rootfs) ([]string, error) {
	var added []string
	kinds := backend.Kinds()
	for _, name := range slices.Sorted(maps.Keys(kinds)) {
		for _, p := range kinds[name].Programs {
			if p.Built == nil || !isExecutable(p.Built()) || slices.Contains(added, p.Name) {
				continue
			}
			if err := r.AddHostFile("/usr/local/bin/"+p.Name, p.Built()); err != nil {
				return added, err
			}
			if missing, err := r.AddLibs(ctx, p.Built()); err != nil || len(missing) > 0 {
				return added, fmt.Errorf("the libraries of %s: %v (missing %v)", p.Built(), err, missing)
			}
			added = append(added, p.Name)
		}
	}
	return added, nil
}

// isExecutable reports whether p is a file anyone may run.
func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// nodeRecipe is the recipe of the image of a kind of node that runs in
// locktest's node program: locktest's executable (opts.NodeBinary, or one
// built from opts.Source), started as `locktest node <kind>`.
func nodeRecipe(ctx context.Context, kind string, opts BuildOptions) (*Recipe, func(), error) {
	bin, cleanup := opts.NodeBinary, func() {}
	if bin == "" {
		b, c, err := buildNodeBinary(ctx, opts.Source)
		if err != nil {
			return nil, func() {}, err
		}
		bin, cleanup = b, c
	}
	r, err := NodeRootfs(ctx, bin)
	return &Recipe{Rootfs: r, Changes: []string{"WORKDIR /data", fmt.Sprintf(`ENTRYPOINT ["/locktest", "node", %q]`, kind)},
		Labels: map[string]string{engine.LabelNodeProgram: kind}}, cleanup, err
}

// BuildOne imports rc into the engine e as the image
// locktest/<backend>:<tag>, labelled as built for backend, unless an image
// of the same inputs exists (or force is set), and removes the older images
// locktest built for backend that no container uses. backend is a name of
// Names, or another image's name (the SSH lab's).
func BuildOne(ctx context.Context, e *engine.Engine, backend string, rc *Recipe, force bool) (BuiltImage, error) {
	hash := rc.Rootfs.Hash()
	tag := rc.Tag
	if tag == "" {
		tag = hash[:12]
	}
	ref := "locktest/" + backend + ":" + tag
	existing, err := builtImages(ctx, e, backend)
	if err != nil {
		return BuiltImage{}, err
	}
	for _, x := range existing {
		if x.Ref == ref && x.Hash == hash && !force {
			x.Reused = true
			return x, nil
		}
	}
	labels := map[string]string{engine.LabelImage: "1", engine.LabelBackend: backend, engine.LabelHash: hash}
	for k, v := range rc.Labels {
		labels[k] = v
	}
	changes := []string{"ENV PATH=" + imagePath}
	changes = append(changes, rc.Changes...)
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		changes = append(changes, fmt.Sprintf("LABEL %s=%q", k, labels[k]))
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(rc.Rootfs.WriteTar(pw)) }()
	res, err := e.Client().ImageImport(ctx, client.ImageImportSource{Source: pr, SourceName: "-"}, ref,
		client.ImageImportOptions{Changes: changes, Message: "built by locktest images build"})
	if err != nil {
		pr.CloseWithError(err)
		return BuiltImage{}, fmt.Errorf("images build %s: docker import: %s", backend, engine.FirstLine(err))
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
	now, err := builtImages(ctx, e, backend)
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
		if _, err := e.Client().ImageRemove(ctx, target, client.ImageRemoveOptions{}); err != nil {
			e.Logger().Debug("keep older image", "image", target, "err", engine.FirstLine(err))
		}
	}
	return *fresh, nil
}

// BaseRootfs returns the directories and files every image has: /tmp,
// /data, /conf, and an /etc/passwd and /etc/group naming root.
func BaseRootfs() *Rootfs {
	r := &Rootfs{}
	r.AddDir("/tmp", fs.ModeSticky|0o777)
	r.AddDir("/data", 0o755)
	r.AddDir("/conf", 0o755)
	r.AddFile("/etc/passwd", []byte("root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n"), 0o644)
	r.AddFile("/etc/group", []byte("root:x:0:\nnogroup:x:65534:\n"), 0o644)
	r.AddDir("/root", 0o700)
	return r
}

// ProgramsRootfs assembles the image called image from the host's
// programs progs, found in the PATH, and their libraries (a Redis image:
// redis-server). A program the host lacks is an error saying how to get
// it, or another image.
func ProgramsRootfs(ctx context.Context, image string, progs []string) (*Rootfs, error) {
	r := BaseRootfs()
	for _, p := range progs {
		bin, err := exec.LookPath(p)
		if err != nil {
			return nil, fmt.Errorf("images build %s: %s is not installed on this host: run `make setup`, or give the provider another image with --image %s=REF", image, p, image)
		}
		bin, _ = filepath.Abs(bin)
		if err := r.AddProgram(ctx, "images build "+image, bin); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// zkJars are the jars of ZooKeeper's class path in Debian's package, the
// local provider's (backend.ZooKeeperClassPath).
var zkJars = strings.Split(backend.ZooKeeperClassPath(backend.DebianJarDir), ":")

// jreSkip are the parts of a JDK directory a server does not need.
var jreSkip = []string{"jmods", "include", "man", "legal", "docs", "demo", "src.zip"}

// ZooKeeperRootfs assembles a ZooKeeper image from the host's Java runtime
// (the directory `java` resolves into, without the JDK's development
// parts), the libraries of its binaries, and Debian's ZooKeeper jars.
func ZooKeeperRootfs(ctx context.Context) (*Rootfs, error) {
	const setup = "run `make setup` (installs zookeeper and a Java runtime), or give the provider another image with --image zookeeper=REF"
	r := BaseRootfs()
	switch err := AddZooKeeper(ctx, r); {
	case errors.Is(err, ErrNoJava):
		return nil, errors.New("images build zookeeper: java is not installed on this host: " + setup)
	case errors.Is(err, ErrNoZooKeeperJars):
		return nil, errors.New("images build zookeeper: the ZooKeeper jars are not installed on this host: " + setup)
	case err != nil:
		return nil, err
	}
	return r, nil
}

// The ZooKeeper parts this host may lack.
var (
	ErrNoJava          = errors.New("java is not installed on this host")
	ErrNoZooKeeperJars = errors.New("the ZooKeeper jars are not installed on this host")
)

// AddZooKeeper adds to r what runs a ZooKeeper peer: the host's Java
// runtime (the directory `java` resolves into, without the JDK's
// development parts), the libraries of its binaries, and Debian's
// ZooKeeper jars with the jars their manifests name. A host without java
// or the jars gives ErrNoJava or ErrNoZooKeeperJars.
func AddZooKeeper(ctx context.Context, r *Rootfs) error {
	java, err := exec.LookPath("java")
	if err != nil {
		return ErrNoJava
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
		return ErrNoZooKeeperJars
	}
	return nil
}

// NodeRootfs assembles the image of a backend whose servers run in
// locktest's node program (etcd, nats): locktest's own executable bin at
// /locktest, whose `node <kind>` command embeds the server, and, when bin
// is not statically linked, the libraries it needs.
func NodeRootfs(ctx context.Context, bin string) (*Rootfs, error) {
	r := BaseRootfs()
	if err := r.AddHostFile("/locktest", bin); err != nil {
		return nil, fmt.Errorf("images build: node program: %w", err)
	}
	if _, err := r.AddLibs(ctx, bin); err != nil {
		return nil, fmt.Errorf("images build: node program: %w", err)
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
			return "", func() {}, errors.New("images build: building locktest for a node program's image needs the go command in PATH")
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
		return "", func() {}, fmt.Errorf("images build: node program: go build in %s: %v: %s", src, err, strings.TrimSpace(string(msg)))
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
			return "", fmt.Errorf("images build: node program: %s is not inside locktest's source tree", dir)
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
