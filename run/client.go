package run

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/locktest/locktest/clusters/backend"
	"github.com/locktest/locktest/impls"
	"github.com/locktest/locktest/impls/external"
	"github.com/locktest/locktest/impls/golib"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/workloads"
)

// ClientsDir is where --client looks a manifest up by name: the
// environment's LOCKTEST_CLIENTS, else the folder clients/ of the
// working directory.
func ClientsDir() string {
	if d := os.Getenv("LOCKTEST_CLIENTS"); d != "" {
		return d
	}
	return "clients"
}

// Manifest registers an external client under a name: the file
// <ClientsDir>/<name>.yaml.
type Manifest struct {
	// Backend is the lock service the client runs against.
	Backend string `yaml:"backend"`
	// Command is the program and its arguments; a relative program path
	// is relative to the manifest's folder, and the program runs there.
	Command []string `yaml:"command"`
	// Params are default --client-opt settings, which the run's override.
	Params map[string]string `yaml:"params"`
}

// clientSpec resolves c.Client: the name of a manifest in ClientsDir, the
// path of a manifest (.yaml), or a command line (split at spaces) whose
// program speaks the client protocol. --backend, which a manifest may
// give, is required.
//
// A run with --lib and no --client runs the adapter it built (the spec of
// the impl's own backend, with the impl's params as the client's).
func (c *Config) clientSpec() (external.Spec, error) {
	if c.Client == "" && len(c.Libs) > 0 {
		impl, err := impls.Lookup(c.Impl)
		if err != nil {
			return external.Spec{}, setupErr("--impl: %v", err)
		}
		if c.adapter == "" {
			return external.Spec{}, setupErr("--lib: the adapter of %s is not built", c.Impl)
		}
		return external.Spec{Command: []string{c.adapter, "-impl", c.Impl}, Backend: impl.Backend, Params: maps.Clone(c.ImplParams)}, nil
	}
	spec := external.Spec{Backend: c.Backend, Params: maps.Clone(c.ClientParams)}
	path := c.Client
	if !strings.ContainsAny(path, " /") {
		path = filepath.Join(ClientsDir(), c.Client+".yaml")
	}
	if strings.HasSuffix(path, ".yaml") {
		m, err := readManifest(path)
		if err != nil {
			return external.Spec{}, setupErr("--client %s: %v", c.Client, err)
		}
		spec.Dir = filepath.Dir(path)
		spec.Command = m.Command
		if spec.Backend == "" {
			spec.Backend = m.Backend
		}
		for k, v := range m.Params {
			if _, set := spec.Params[k]; !set {
				if spec.Params == nil {
					spec.Params = map[string]string{}
				}
				spec.Params[k] = v
			}
		}
	} else {
		spec.Command = strings.Fields(c.Client)
	}
	if len(spec.Command) == 0 {
		return external.Spec{}, setupErr("--client %q names no program", c.Client)
	}
	if err := findProgram(spec); err != nil {
		return external.Spec{}, setupErr("--client %s: %v", c.Client, err)
	}
	if _, ok := backend.ServiceOf(spec.Backend); !ok {
		return external.Spec{}, setupErr("--backend must be one of %s for an external client, got %q",
			strings.Join(clientBackends(), ", "), spec.Backend)
	}
	return spec, nil
}

// clientBackends are the backends an external client can run against,
// sorted: every backend (clusters/backend), each on its default number of
// nodes (backend.DefaultNodes).
func clientBackends() []string { return slices.Sorted(slices.Values(backend.All())) }

// readManifest reads a client manifest, strictly.
func readManifest(path string) (Manifest, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Manifest{}, err
	}
	var m Manifest
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&m); err != nil {
		return Manifest{}, fmt.Errorf("%s: %v", path, err)
	}
	if len(m.Command) == 0 {
		return Manifest{}, fmt.Errorf("%s: no command", path)
	}
	return m, nil
}

// findProgram checks that spec's program exists and can be run.
func findProgram(spec external.Spec) error {
	prog := spec.Command[0]
	if !strings.Contains(prog, "/") {
		_, err := exec.LookPath(prog)
		return err
	}
	if !filepath.IsAbs(prog) && spec.Dir != "" {
		prog = filepath.Join(spec.Dir, prog)
	}
	st, err := os.Stat(prog)
	switch {
	case err != nil:
		return fmt.Errorf("no program %s", prog)
	case st.IsDir() || st.Mode()&0o111 == 0:
		return fmt.Errorf("%s is not an executable file", prog)
	}
	return nil
}

// ImplInfo returns the impl a run of c tests: the Go impl c.Impl names
// (with --lib, its doc says which library the adapter built with it names
// once Run probed it), or, with c.Client, the external client seen as an
// impl (its backend and node count; its fencing and pause points once Run
// probed it). Its error is a *SetupError that names the flag.
func (c *Config) ImplInfo() (impls.Impl, error) {
	if c.Client == "" {
		impl, err := impls.Lookup(c.Impl)
		if err != nil {
			return impls.Impl{}, setupErr("--impl: %v", err)
		}
		if caps := c.clientCaps; caps != nil {
			impl.Doc = fmt.Sprintf("%s (%s %s, through the client protocol: %s -impl %s)", impl.Doc, caps.Library, caps.Version, c.adapter, c.Impl)
		}
		return impl, nil
	}
	spec, err := c.clientSpec()
	if err != nil {
		return impls.Impl{}, err
	}
	caps := external.Caps{Name: clientLabel(c.Client)}
	if c.clientCaps != nil {
		caps = *c.clientCaps
	}
	return clientImpl(spec, caps), nil
}

// external reports whether the run's clients are programs that speak the
// client protocol: an external client (--client), or the adapter of a Go
// impl built with pinned libraries (--lib).
func (c *Config) external() bool { return c.Client != "" || len(c.Libs) > 0 }

// validateLibs checks --lib (beside --client, Validate refused it
// already): pins of a Go impl's libraries, each
// module@version, each one of the modules the impl is written with, and
// no resource mode that the client protocol cannot carry.
func (c *Config) validateLibs(impl impls.Impl) error {
	if len(c.Libs) == 0 {
		return nil
	}
	pins, err := golib.ParsePins(c.Libs)
	if err != nil {
		return setupErr("--lib %v", err)
	}
	for _, p := range pins {
		if !slices.Contains(impl.Libraries, p.Module) {
			return setupErr("--lib %s: %s is written with %s, and %s is none of them", p, c.Impl, strings.Join(impl.Libraries, ", "), p.Module)
		}
	}
	if c.Mode == workloads.ModeEtcdGuarded {
		return setupErr("--resource etcd-guarded cannot run with --lib: the adapter serves %s through the client protocol, which carries no guarded writes", c.Impl)
	}
	return nil
}

// buildAdapter builds, or finds in the cache, the adapter of c.Impl with
// c.Libs (golib.Build), from locktest's source tree (golib.Source), with
// the go command's output in logDir/adapter-build.log. Its error, a
// *SetupError in one line, names the pins, the step that failed and its
// first error, and the log.
func (c *Config) buildAdapter(ctx context.Context, logDir string, lg *slog.Logger) error {
	pins, err := golib.ParsePins(c.Libs)
	if err != nil {
		return setupErr("--lib %v", err)
	}
	src, err := golib.Source()
	if err != nil {
		return setupErr("--lib: %v", err)
	}
	path := filepath.Join(logDir, "adapter-build.log")
	f, err := os.Create(path)
	if err != nil {
		return setupErr("store: %v", err)
	}
	defer f.Close()
	lg.Info("adapter", "impl", c.Impl, "lib", strings.Join(c.Libs, ","), "src", src)
	bin, err := golib.Build(ctx, golib.Request{Impl: c.Impl, Pins: pins, Src: src}, f)
	if err != nil {
		return setupErr("--lib: %v (the go command's output: %s)", err, path)
	}
	lg.Info("adapter ready", "program", bin)
	c.adapter = bin
	return nil
}

// probe reads the client program's capabilities (probeClient), names the
// run's impl after it, and checks the settings again with what it said.
func (c *Config) probe(ctx context.Context, logDir string) (impls.Impl, error) {
	spec, err := c.clientSpec()
	if err != nil {
		return impls.Impl{}, err
	}
	caps, err := probeClient(ctx, spec, logDir)
	if err != nil {
		return impls.Impl{}, err
	}
	c.clientCaps, c.Impl = &caps, caps.Name
	if err := c.Validate(); err != nil {
		return impls.Impl{}, err
	}
	if c.Client == "" {
		return c.ImplInfo()
	}
	return clientImpl(spec, caps), nil
}

// clientLabel names a client before its program said its name: the
// manifest's name, or the program's file name without its extension.
func clientLabel(client string) string {
	f := strings.Fields(client)
	if len(f) == 0 {
		return "client"
	}
	base := filepath.Base(f[0])
	if f[0] == "/usr/bin/python3" || strings.HasPrefix(base, "python") && len(f) > 1 {
		base = filepath.Base(f[1])
	}
	return strings.TrimSuffix(base, filepath.Ext(base))
}

// clientImpl is an external client seen as an impl: its backend and node
// count, and, from its capabilities, its fencing and pause points.
func clientImpl(spec external.Spec, caps external.Caps) impls.Impl {
	doc := caps.Doc
	if doc == "" {
		doc = "an external lock client"
	}
	return impls.Impl{
		Name: caps.Name, Backend: spec.Backend, Nodes: backend.DefaultNodes(spec.Backend), Fenced: caps.Fenced,
		Blocking: caps.Blocking, Points: caps.Points, Notices: caps.Notices,
		Doc: fmt.Sprintf("%s (%s %s, through the client protocol: %s)", doc, caps.Library, caps.Version, strings.Join(spec.Command, " ")),
	}
}

// probeClient starts the client program once to read its capabilities,
// with its stderr in logDir/client-probe.log. Its error, a *SetupError,
// names that file, so the run's folder is kept to show it.
func probeClient(ctx context.Context, spec external.Spec, logDir string) (external.Caps, error) {
	path := filepath.Join(logDir, "client-probe.log")
	f, err := os.Create(path)
	if err != nil {
		return external.Caps{}, setupErr("store: %v", err)
	}
	defer f.Close()
	caps, err := external.Probe(ctx, spec, f)
	if err != nil {
		return external.Caps{}, setupErr("%v (its stderr: %s)", err, path)
	}
	return caps, nil
}

// externalPool is the pool of a run of an external client as the nemesis
// sees it: it stops, kills and replaces the clients, but cannot skew their
// wall clocks, which their programs read for themselves (the worker's
// offset would move nothing), so clock-skew-client is unavailable.
type externalPool struct{ nemesis.CrashableClients }

// noTokenProblem is the problem of a run in resource mode fenced whose
// client grants no fencing token: the store refuses every write, so the
// run cannot show that fencing protects the resource.
func noTokenProblem(name string) string {
	return fmt.Sprintf("resource mode fenced, but the client %s gives no fencing token: every write carries none and the store refuses it, so fencing cannot protect this client's resource and the run cannot test it", name)
}
