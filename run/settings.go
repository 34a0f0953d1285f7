package run

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/locktest/locktest/clusters/backend"
	"github.com/locktest/locktest/clusters/provider"
	"github.com/locktest/locktest/impls"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/workloads"
)

// The groups of settings, in the order `locktest run --help` lists them.
const (
	GroupWorkload = "workload"
	GroupFaults   = "faults"
	GroupResource = "resource"
	GroupPlatform = "platform"
	GroupOutput   = "output"
)

// Groups are the setting groups in help order.
var Groups = []string{GroupWorkload, GroupFaults, GroupResource, GroupPlatform, GroupOutput}

// Setting is one setting of a run, defined once: its name is the flag of
// `locktest run` (--Name), the key of a scenario file (Key: the name with
// underscores) and the key of the run's settings in results.json; Doc is
// the flag's help; Group places it in the help. Field binds it to the
// Config field it sets (a fault setting: its value in
// Config.FaultSettings), which gives its type, its parsing and its default
// (DefaultConfig's value). A setting checked by Config.Validate names itself
// as its flag in the error.
type Setting struct {
	Name  string
	Group string
	Doc   string
	// Field returns the Value of the setting in c.
	Field func(c *Config) Value
	// Scenario says whether a scenario file may set it; the debate sets
	// the others (the seed, the store, the run's name and expectation, the
	// provider).
	Scenario bool
}

// listed are the settings whose values come from a registry, which Help
// names after the setting's Doc. They are read when the help is shown,
// not when the table is built: the impls register themselves in packages
// that may be initialized after this one.
var listed = map[string]func() []string{"impl": impls.Names, "faults": nemesis.Names}

// Help is the setting's help: its Doc, then the values it takes where a
// registry lists them, or the faults that read it (nemesis.Readers).
func (s Setting) Help() string {
	if names, ok := listed[s.Name]; ok {
		return s.Doc + ": " + strings.Join(names(), ", ")
	}
	if readers := nemesis.Readers(s.Name); len(readers) > 0 {
		return s.Doc + " (read by " + strings.Join(readers, ", ") + ")"
	}
	return s.Doc
}

// Key is the setting's key in a scenario file and in results.json.
func (s Setting) Key() string { return strings.ReplaceAll(s.Name, "-", "_") }

// Value is a setting's value inside one Config: what a flag parses into
// (it satisfies pflag.Value), and what a scenario's value and the run's
// results are read from and written as.
type Value interface {
	// String is the value as a flag would take it.
	String() string
	// Set parses a flag's text into the field.
	Set(s string) error
	// Type names the type of value, for the help ("duration", "int", ...).
	Type() string
}

// Settings is the table of run settings. Adding one means adding one entry
// here (and the Config field it binds): the flag, the scenario key, the
// results and the help follow from it. The settings of the faults are not
// entries here: each is declared beside its fault (nemesis.NewSetting),
// and faultRows makes their entries, after --interval. Those that stay
// here shape the schedule rather than one fault (faults, schedule,
// interval, quiet-time, target, stagger). Nor are the settings only one
// provider reads: each provider declares its own (provider.Def.Settings),
// and providerRows makes their entries, after --provider.
var Settings = insertAfter(insertAfter([]Setting{
	{"impl", GroupWorkload, "lock implementation", str(func(c *Config) *string { return &c.Impl }), true},
	{"lib", GroupWorkload, "pin Go modules of --impl at other versions, module@version, comma-separated, each one of the impl's libraries: the run builds an adapter of the impl with them (once, then cached) and runs it as an external client (see docs/clients.md)", list(func(c *Config) *[]string { return &c.Libs }), true},
	{"client", GroupWorkload, "an external lock client in place of --impl: a manifest name in clients/, a manifest file, or a command line whose program speaks the client protocol (see docs/clients.md)", str(func(c *Config) *string { return &c.Client }), true},
	{"backend", GroupWorkload, "the lock service an external client runs against: " + strings.Join(clientBackends(), ", ") + " (a manifest may give it)", str(func(c *Config) *string { return &c.Backend }), true},
	{"client-opt", GroupWorkload, "external client settings key=value, passed in its hello", strMap(func(c *Config) *map[string]string { return &c.ClientParams }), true},
	{"clients", GroupWorkload, "lock clients, each its own worker process", rule(integer(func(c *Config) *int { return &c.Clients }), "must be at least 1", atLeast(1)), true},
	{"locks", GroupWorkload, "lock names the clients contend for", rule(integer(func(c *Config) *int { return &c.Locks }), "must be at least 1", atLeast(1)), true},
	{"ttl", GroupWorkload, "lock lease time", rule(dur(func(c *Config) *time.Duration { return &c.TTL }), "must be at least 1ms", atLeast(time.Millisecond)), true},
	{"time", GroupWorkload, "how long the workload runs", rule(dur(func(c *Config) *time.Duration { return &c.Duration }), "must be positive", positive[time.Duration]), true},
	{"seed", GroupWorkload, "seed of every random choice (workload and faults)", int64v(func(c *Config) *int64 { return &c.Seed }), false},
	{"think", GroupWorkload, "longest think time between critical sections", rule(dur(func(c *Config) *time.Duration { return &c.Think }), "must not be negative", notNegative[time.Duration]), true},
	{"retry", GroupWorkload, "longest first wait after a failed acquire (with --backoff uniform: after every one)", rule(dur(func(c *Config) *time.Duration { return &c.Retry }), "must not be negative", notNegative[time.Duration]), true},
	{"retry-max", GroupWorkload, "longest wait of the exponential backoff", rule(dur(func(c *Config) *time.Duration { return &c.RetryMax }), "must not be negative", notNegative[time.Duration]), true},
	{"backoff", GroupWorkload, "wait after failed acquires in a row: " + workloads.BackoffExponential + " (a random wait up to --retry, doubling up to --retry-max, as real clients do) or " + workloads.BackoffUniform + " (a random wait up to --retry every time: the tight retry)", str(func(c *Config) *string { return &c.Backoff }), true},
	{"work", GroupWorkload, "longest time spent between the read and the write", rule(dur(func(c *Config) *time.Duration { return &c.Work }), "must not be negative", notNegative[time.Duration]), true},
	{"work-min", GroupWorkload, "shortest time spent between the read and the write (a slow critical section)", dur(func(c *Config) *time.Duration { return &c.WorkMin }), true},
	{"max-sections", GroupWorkload, "end the workload once this many acquires succeeded, or when --time is up if sooner (0: run for --time)", rule(integer(func(c *Config) *int { return &c.MaxCriticalSections }), "must not be negative", notNegative[int]), true},
	{"stop-on-violation", GroupWorkload, "end the workload 1s + ttl after the first violation the checks confirm while the run runs (mutual exclusion, the resource and fencing tokens), then heal, stop and check the whole history as any run", boolean(func(c *Config) *bool { return &c.StopOnViolation }), true},
	{"on-lost", GroupWorkload, "what a holder does when its client tells it that its lease is lost (a lost notice): " + workloads.OnLostIgnore + " (goes on, as a client that does not listen) or " + workloads.OnLostStopWriting + " (writes no more and releases, as a careful holder)", str(func(c *Config) *string { return &c.OnLost }), true},
	{"retry-release", GroupWorkload, "try a release of unknown outcome again, with the same lease, this long after its last try, after the worker's next acquire (before its critical section), until a try is ok or fails, as an application's clean-up retries a failed unlock (0: never)", rule(dur(func(c *Config) *time.Duration { return &c.RetryRelease }), "must not be negative", notNegative[time.Duration]), true},
	{"retry-acquire", GroupWorkload, "how many times to try again at once an acquire of unknown outcome, as many clients' callers do (0: never)", rule(integer(func(c *Config) *int { return &c.RetryAcquire }), "must not be negative", notNegative[int]), true},
	{"op-timeout", GroupWorkload, "deadline of each lock or store operation", rule(dur(func(c *Config) *time.Duration { return &c.Timeout }), "must be positive", positive[time.Duration]), true},
	{"impl-opt", GroupWorkload, "impl settings key=value (see docs/backends.md)", strMap(func(c *Config) *map[string]string { return &c.ImplParams }), true},

	{"faults", GroupFaults, "faults to inject, comma-separated, one at a time; a+b injects a and b together", list(func(c *Config) *[]string { return &c.Faults }), true},
	{"schedule", GroupFaults, "replay a schedule file (a stored run's schedule.json): exactly its faults, with their targets and settings, at their offsets, in place of --faults; its workload settings apply unless given here", str(func(c *Config) *string { return &c.Schedule }), false},
	{"interval", GroupFaults, "mean quiet time between faults", rule(dur(func(c *Config) *time.Duration { return &c.Interval }), "must be positive", positive[time.Duration]), true},
	{"quiet-time", GroupFaults, "fault-free time at the end of the run, after the final heal", dur(func(c *Config) *time.Duration { return &c.Quiet }), true},
	{"target", GroupFaults, "pin what faults hit: fault=node-or-role-or-process[,...], several separated by ;, e.g. 'clock-bump=n3;kill-node=master'", targets(func(c *Config) *map[string][]string { return &c.Targets }), true},
	{"stagger", GroupFaults, "wait between the parts of a combined fault (a+b)", rule(dur(func(c *Config) *time.Duration { return &c.Stagger }), "must not be negative", notNegative[time.Duration]), true},

	{"resource", GroupResource, "resource store mode: " + Join(workloads.Modes()), mode(func(c *Config) *workloads.Mode { return &c.Mode }), true},

	{"provider", GroupPlatform, providersHelp(), str(func(c *Config) *string { return &c.Provider }), false},
	{"net", GroupPlatform, "network: " + strings.Join(NetModes, ", ") + " (" + NetAuto + ": namespaces when a network fault is asked for)", str(func(c *Config) *string { return &c.Net }), true},
	{"subnet", GroupPlatform, "IPv4 /24 of the run's network namespaces (default: a free 10.77.N.0/24)", str(func(c *Config) *string { return &c.Subnet }), true},
	{"persistence", GroupPlatform, "node durability of the backends that have it (" + strings.Join(slices.DeleteFunc(backend.All(), func(b string) bool { return !hasPersistence(b) }), ", ") + "): " + strings.Join(Persistences, ", ") + " (default off)", str(func(c *Config) *string { return &c.Persistence }), true},
	{"cluster-opt", GroupPlatform, "cluster settings key=value (see docs/backends.md)", strMap(func(c *Config) *map[string]string { return &c.ClusterParams }), true},

	{"store", GroupOutput, "folder of stored runs", str(func(c *Config) *string { return &c.StoreDir }), false},
	{"name", GroupOutput, "name of the run's folder in the store (default impl-faults-resource)", str(func(c *Config) *string { return &c.Name }), false},
	{"profile", GroupOutput, "folder for CPU profiles of the driver and of each worker, and the driver's heap (go tool pprof reads them)", str(func(c *Config) *string { return &c.ProfileDir }), false},
	{"expect", GroupOutput, "expected verdict: " + strings.Join(Expectations, " or ") + " (invalid: a run meant to reproduce an anomaly)", str(func(c *Config) *string { return &c.Expect }), false},
}, "interval", faultRows()), "provider", providerRows())

// faultRows are an entry for each fault setting (nemesis.Declared), in
// the faults group, by name: its flag, scenario key and results key are
// its name, its help its Doc and the faults that read it, its value
// Config.FaultSettings' and its default nemesis.Defaults'
// (DefaultConfig).
func faultRows() []Setting {
	var rows []Setting
	for _, fs := range nemesis.Declared() {
		rows = append(rows, Setting{Name: fs.Name(), Group: GroupFaults, Doc: fs.Doc(), Scenario: true,
			Field: func(c *Config) Value { return faultValue{fs, &c.FaultSettings} }})
	}
	return rows
}

// insertAfter returns table with rows after the entry called name: the
// rows a registry makes (faultRows, providerRows), where the help lists
// them.
func insertAfter(table []Setting, name string, rows []Setting) []Setting {
	at := slices.IndexFunc(table, func(s Setting) bool { return s.Name == name }) + 1
	return slices.Insert(table, at, rows...)
}

// faultValue is the Value of a fault setting inside Config.FaultSettings;
// its bound is the setting's own (nemesis.AnySetting.Check).
type faultValue struct {
	s  nemesis.AnySetting
	vs *nemesis.Values
}

func (v faultValue) String() string     { return v.s.Text(*v.vs) }
func (v faultValue) Type() string       { return v.s.Type() }
func (v faultValue) Set(s string) error { return v.s.SetText(v.vs, s) }
func (v faultValue) check() error       { return v.s.Check(*v.vs) }

// IsBoolFlag reports whether the setting is a switch, which a flag
// without a value sets.
func (v faultValue) IsBoolFlag() bool { return v.s.Type() == nemesis.Switch.Type }

// SettingNamed returns the setting named name (its flag name or its key).
func SettingNamed(name string) (Setting, bool) {
	for _, s := range Settings {
		if s.Name == name || s.Key() == name {
			return s, true
		}
	}
	return Setting{}, false
}

// Values returns every setting of c as its flag would take it, by key:
// what results.json records of how the run was made.
func (c *Config) Values() map[string]string {
	out := make(map[string]string, len(Settings))
	for _, s := range Settings {
		out[s.Key()] = s.Field(c).String()
	}
	return out
}

// Join lists names of a string type, comma-separated, for help texts.
func Join[S ~string](names []S) string {
	s := make([]string, len(names))
	for i, n := range names {
		s[i] = string(n)
	}
	return strings.Join(s, ", ")
}

// The kinds of Value, each bound to a Config field by a function from the
// Config to the field.

// scalar is the Value of a one-value field of type T, whose text is its
// kind's (nemesis.Kind: the fault settings' kinds, and the others below).
type scalar[T any] struct {
	p    *T
	kind nemesis.Kind[T]
}

func (v scalar[T]) String() string { return v.kind.Format(*v.p) }
func (v scalar[T]) Type() string   { return v.kind.Type }
func (v scalar[T]) Set(s string) error {
	x, err := v.kind.Parse(s)
	if err != nil {
		return err
	}
	*v.p = x
	return nil
}

// bind makes the Value constructor of a scalar setting of kind k.
func bind[T any](k nemesis.Kind[T]) func(func(*Config) *T) func(*Config) Value {
	return func(f func(*Config) *T) func(*Config) Value {
		return func(c *Config) Value { return scalar[T]{f(c), k} }
	}
}

var (
	dur     = bind(nemesis.Duration)
	integer = bind(nemesis.Kind[int]{Type: "int", Parse: nemesis.ParseAs(strconv.Atoi, "a whole number"), Format: strconv.Itoa})
	int64v  = bind(nemesis.Kind[int64]{Type: "int", Parse: nemesis.ParseAs(func(s string) (int64, error) { return strconv.ParseInt(s, 10, 64) }, "a whole number"),
		Format: func(n int64) string { return strconv.FormatInt(n, 10) }})
	str  = bind(nemesis.Text)
	mode = bind(nemesis.Kind[workloads.Mode]{Type: "string", Parse: func(s string) (workloads.Mode, error) { return workloads.Mode(s), nil },
		Format: func(m workloads.Mode) string { return string(m) }})
)

// rule gives a scalar setting the bound Config.Validate checks: ok says
// whether a value is within it, and want what it must be ("must be
// positive"). The error names the flag and the value: "--interval must be
// positive, got 0s".
func rule[T any](v func(*Config) Value, want string, ok func(T) bool) func(*Config) Value {
	return func(c *Config) Value { return ruled[T]{v(c).(scalar[T]), want, ok} }
}

// ruled is a scalar with a bound (see rule).
type ruled[T any] struct {
	scalar[T]
	want string
	ok   func(T) bool
}

// check returns nil when the value is within the bound, else what it must
// be and what it is.
func (v ruled[T]) check() error {
	if v.ok(*v.p) {
		return nil
	}
	return fmt.Errorf("%s, got %s", v.want, v.String())
}

// checkBounds returns the error of the first setting of c, in table order,
// whose value is out of its bound.
func (c *Config) checkBounds() error {
	for _, s := range Settings {
		if r, ok := s.Field(c).(interface{ check() error }); ok {
			if err := r.check(); err != nil {
				return setupErr("--%s %v", s.Name, err)
			}
		}
	}
	return nil
}

// positive, notNegative and atLeast are the usual bounds of rule.
func positive[T cmp.Ordered](x T) bool    { var zero T; return x > zero }
func notNegative[T cmp.Ordered](x T) bool { var zero T; return x >= zero }
func atLeast[T cmp.Ordered](min T) func(T) bool {
	return func(x T) bool { return x >= min }
}

// BoolValue is a Value that may be a switch: when IsBoolFlag says so, a
// flag without a value sets it.
type BoolValue interface {
	Value
	IsBoolFlag() bool
}

type boolValue struct{ scalar[bool] }

func (boolValue) IsBoolFlag() bool { return true }

func boolean(f func(*Config) *bool) func(*Config) Value {
	b := bind(nemesis.Switch)(f)
	return func(c *Config) Value { return boolValue{b(c).(scalar[bool])} }
}

// listValue is a comma-separated list; each Set appends, as a repeated
// flag does.
type listValue struct{ p *[]string }

func list(f func(*Config) *[]string) func(*Config) Value {
	return func(c *Config) Value { return listValue{f(c)} }
}
func (v listValue) String() string { return strings.Join(*v.p, ",") }
func (v listValue) Type() string   { return "strings" }
func (v listValue) Set(s string) error {
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			*v.p = append(*v.p, x)
		}
	}
	return nil
}

// mapValue is key=value pairs separated by commas; each Set adds, as a
// repeated flag does.
type mapValue struct{ p *map[string]string }

func strMap(f func(*Config) *map[string]string) func(*Config) Value {
	return func(c *Config) Value { return mapValue{f(c)} }
}
func (v mapValue) String() string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(*v.p)) {
		parts = append(parts, k+"="+(*v.p)[k])
	}
	return strings.Join(parts, ",")
}
func (v mapValue) Type() string { return "key=value" }
func (v mapValue) Set(s string) error {
	if *v.p == nil {
		*v.p = map[string]string{}
	}
	for _, kv := range strings.Split(s, ",") {
		k, val, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return fmt.Errorf("%s must be formatted as key=value", kv)
		}
		(*v.p)[k] = val
	}
	return nil
}

// targetsValue pins faults: fault=target[,target] separated by ;
// (nemesis.ParseTargets).
type targetsValue struct{ p *map[string][]string }

func targets(f func(*Config) *map[string][]string) func(*Config) Value {
	return func(c *Config) Value { return targetsValue{f(c)} }
}
func (v targetsValue) String() string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(*v.p)) {
		parts = append(parts, k+"="+strings.Join((*v.p)[k], ","))
	}
	return strings.Join(parts, ";")
}
func (v targetsValue) Type() string { return "fault=targets" }
func (v targetsValue) Set(s string) error {
	t, err := nemesis.ParseTargets(s)
	if err != nil {
		return err
	}
	if *v.p == nil {
		*v.p = map[string][]string{}
	}
	for k, w := range t {
		(*v.p)[k] = append((*v.p)[k], w...)
	}
	return nil
}

// Set sets the setting named name (its flag name or key) in c from the
// text its flag takes. Unlike a repeated flag, it replaces what a list or
// map setting held.
func (c *Config) Set(name, text string) error {
	s, ok := SettingNamed(name)
	if !ok {
		return fmt.Errorf("no setting %q", name)
	}
	switch v := s.Field(c).(type) {
	case listValue:
		*v.p = nil
	case mapValue:
		*v.p = nil
	case targetsValue:
		*v.p = nil
	case *provider.Flag:
		v.Reset()
	}
	return s.Field(c).Set(text)
}
