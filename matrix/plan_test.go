package matrix

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/locktest/locktest/clusters/backend"
	"github.com/locktest/locktest/impls"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/reports"
	"github.com/locktest/locktest/workloads"
)

func TestParseClasses(t *testing.T) {
	tests := []struct {
		in      []string
		want    []Class
		wantErr string
	}{
		{nil, Classes, ""},
		{[]string{"all"}, Classes, ""},
		{[]string{"client-pause"}, []Class{ClassNone, ClassClientPause}, ""},
		{[]string{"clock", "none", "partition"}, []Class{ClassNone, ClassPartition, ClassClock}, ""},
		{[]string{"gc"}, nil, `unknown fault class "gc" (known: none, client-pause, node-pause, kill-restart, partition, clock, client-clock, or a fault: ` + strings.Join(nemesis.Names(), ", ") + ")"},
		// A fault of the registry is a class of its own, after the others.
		{[]string{"noop", "clock"}, []Class{ClassNone, ClassClock, "noop"}, ""},
	}
	for _, tt := range tests {
		got, err := ParseClasses(tt.in)
		if tt.wantErr != "" {
			if err == nil || err.Error() != tt.wantErr {
				t.Errorf("%v: err %v, want %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("%v: %v %v, want %v", tt.in, got, err, tt.want)
		}
	}
}

// A fault defined in one file of the nemesis (noop) is a column of the
// matrix when asked for, titled and documented from its registration.
func TestFaultAsAClass(t *testing.T) {
	impl, _ := impls.Lookup("redis-set-nx-px")
	if got := Faults("noop", impl); !slices.Equal(got, []string{"noop"}) {
		t.Errorf("Faults(noop) = %v", got)
	}
	spec, _ := nemesis.Lookup("noop")
	var found bool
	for _, c := range Columns([]Class{"noop"}) {
		if c.Key == SafetyColumn("noop") {
			found = c.Title == "mutex: noop" && strings.Contains(c.Doc, spec.Doc)
		}
	}
	if !found {
		t.Errorf("no column for noop titled and documented from its spec: %+v", Columns([]Class{"noop"}))
	}
}

func TestFaultsOfEachClass(t *testing.T) {
	tests := []struct {
		impl  string
		class Class
		want  []string
	}{
		{"redis-set-nx-px", ClassNone, nil},
		{"redis-set-nx-px", ClassClientPause, []string{"pause-client"}},
		{"redis-set-nx-px", ClassNodePause, []string{"pause-node"}},
		{"redis-set-nx-px", ClassKillRestart, []string{"kill-node"}},
		{"redis-set-nx-px", ClassPartition, []string{"client-isolate"}},
		{"etcd-mutex", ClassPartition, []string{"isolate"}},
		{"redlock", ClassPartition, []string{"halves"}},
		{"redis-cluster", ClassPartition, []string{"halves"}},
		{"zk-recipe", ClassClock, []string{"clock-bump", "clock-strobe"}},
	}
	for _, tt := range tests {
		if got := Faults(tt.class, mustLookup(t, tt.impl)); !slices.Equal(got, tt.want) {
			t.Errorf("%s %s: %v, want %v", tt.impl, tt.class, got, tt.want)
		}
	}
}

func TestPlan(t *testing.T) {
	o := DefaultOptions()
	o.Impls, o.Seeds, o.Classes = []string{"redis-set-nx-px", "redlock"}, 2, []Class{ClassClientPause}
	o.Base.StoreDir = "/tmp/x"
	jobs, err := Plan(o)
	if err != nil {
		t.Fatal(err)
	}
	var labels []string
	for _, j := range jobs {
		labels = append(labels, j.Label())
	}
	// The timed runs first, then impl by impl, seed by seed.
	// redis-set-nx-px's leases carry a fencing token, so its client-pause
	// runs again with a fenced store; redlock's carry none.
	want := []string{
		"redis-set-nx-px perf-1 seed 1", "redis-set-nx-px perf-8 seed 1", "redlock perf-1 seed 1", "redlock perf-8 seed 1",
		"redis-set-nx-px none seed 1", "redis-set-nx-px client-pause seed 1", "redis-set-nx-px client-pause-fenced seed 1", "redis-set-nx-px deadlock seed 1",
		"redis-set-nx-px reentrancy seed 1",
		"redis-set-nx-px none seed 2", "redis-set-nx-px client-pause seed 2", "redis-set-nx-px client-pause-fenced seed 2", "redis-set-nx-px deadlock seed 2",
		"redlock none seed 1", "redlock client-pause seed 1", "redlock deadlock seed 1", "redlock reentrancy seed 1",
		"redlock none seed 2", "redlock client-pause seed 2", "redlock deadlock seed 2",
	}
	if !slices.Equal(labels, want) {
		t.Fatalf("jobs\n%s\nwant\n%s", strings.Join(labels, "\n"), strings.Join(want, "\n"))
	}
	for _, j := range jobs {
		c := j.Config
		if want := workloads.ModeNone; j.Class == ClassClientPauseFenced {
			want = workloads.ModeFenced
			pause := nemesis.Pause.Of(c.FaultSettings)
			if c.Mode != want || !slices.Equal(c.Faults, []string{"pause-client"}) || pause != 2*time.Second || c.StopOnViolation ||
				!strings.Contains(c.Command, "--resource fenced") || c.Name != "matrix-redis-set-nx-px-client-pause-fenced" {
				t.Errorf("%s: mode %s, faults %v, pause %v, stop %v, name %s, command %q", j.Label(), c.Mode, c.Faults, pause, c.StopOnViolation, c.Name, c.Command)
			}
			continue
		}
		if c.Mode != workloads.ModeNone || c.StoreDir != "/tmp/x" || c.Seed != j.Seed || c.TTL != 500*time.Millisecond || c.Impl != j.Impl {
			t.Errorf("%s: mode %s store %s seed %d ttl %v impl %s", j.Label(), c.Mode, c.StoreDir, c.Seed, c.TTL, c.Impl)
		}
		if !strings.HasPrefix(c.Name, "matrix-"+j.Impl+"-") {
			t.Errorf("%s: run name %q", j.Label(), c.Name)
		}
		switch {
		case j.Probe == ProbePerf1 || j.Probe == ProbePerf8:
			want := map[Probe]int{ProbePerf1: 1, ProbePerf8: 8}[j.Probe]
			if c.Clients != want || len(c.Faults) != 0 || c.Duration != 4*time.Second || !j.Timed() ||
				c.MaxCriticalSections != PerfSections || !strings.Contains(c.Command, fmt.Sprintf("--max-sections %d", PerfSections)) {
				t.Errorf("%s: %d clients, faults %v, %v, timed %v, ends after %d acquires, command %q", j.Label(), c.Clients, c.Faults, c.Duration, j.Timed(), c.MaxCriticalSections, c.Command)
			}
		case c.MaxCriticalSections != 0 || strings.Contains(c.Command, "--max-sections"):
			t.Errorf("%s: a run that is not timed ends after %d acquires: %q", j.Label(), c.MaxCriticalSections, c.Command)
		case j.Probe == ProbeSafety && j.Class == ClassNone:
			if c.Clients != 8 || len(c.Faults) != 0 || c.Duration != 8*time.Second {
				t.Errorf("%s: %d clients, faults %v", j.Label(), c.Clients, c.Faults)
			}
		case j.Probe == ProbeDeadlock:
			if kh := nemesis.KillHolder.Of(c.FaultSettings); !kh || !slices.Equal(c.Faults, []string{"kill-client"}) {
				t.Errorf("%s: kill holder %v, faults %v", j.Label(), kh, c.Faults)
			}
		case j.Probe == ProbeSafety && j.Class == ClassClientPause:
			pause, point := nemesis.Pause.Of(c.FaultSettings), nemesis.PausePoint.Of(c.FaultSettings)
			if c.Clients != 5 || !slices.Equal(c.Faults, []string{"pause-client"}) || pause != 2*time.Second || point != workloads.PointAfterAcquire {
				t.Errorf("%s: %d clients, faults %v, pause %v at %s", j.Label(), c.Clients, c.Faults, pause, point)
			}
		}
		// The fault classes' safety runs stop at their first violation,
		// and so do the fault-free ones, none of which is timed; the
		// command says so as the config does.
		if j.Probe == ProbeSafety && j.Timed() {
			t.Errorf("%s is timed: a safety run runs beside others", j.Label())
		}
		if stop := j.Probe == ProbeSafety && (j.Class == ClassClientPause || j.Class == ClassNone); c.StopOnViolation != stop || strings.Contains(c.Command, "--stop-on-violation") != stop {
			t.Errorf("%s: stop-on-violation %v, command %q", j.Label(), c.StopOnViolation, c.Command)
		}
		if j.Probe != ProbeReentrant {
			if err := c.Validate(); err != nil {
				t.Errorf("%s: the run config is refused: %v", j.Label(), err)
			}
		}
	}
}

func TestOptionsValidate(t *testing.T) {
	tests := []struct {
		change func(*Options)
		want   string
	}{
		{func(o *Options) { o.Impls = []string{"nope"} }, `--impl: unknown impl "nope"`},
		{func(o *Options) { o.Seeds = 0 }, "--seeds must be at least 1, got 0"},
		{func(o *Options) { o.Duration = time.Second }, "--time must be at least 2s"},
		{func(o *Options) { o.TTL = 0 }, "--ttl must be at least 1ms"},
		{func(o *Options) { o.Clients = 1 }, "--clients must be at least 2"},
	}
	for _, tt := range tests {
		o := DefaultOptions()
		tt.change(&o)
		if _, err := Plan(o); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("err %v, want %q", err, tt.want)
		}
	}
}

func TestEveryImplDescribesItsProperties(t *testing.T) {
	for _, n := range impls.Names() {
		i := mustLookup(t, n)
		if (i.TokenSource != "") != i.Fenced {
			t.Errorf("%s: fenced %v but token source %q", n, i.Fenced, i.TokenSource)
		}
		if i.Wait == "" {
			t.Errorf("%s: no Wait description", n)
		}
	}
}

// TestPlanGivesExternalClientsRowsOfTheirOwn: a client's jobs run it by
// its manifest, with every probe but the reentrancy probe, after the
// impls; with clients only, no impl is planned.
func TestPlanGivesExternalClientsRowsOfTheirOwn(t *testing.T) {
	t.Setenv("LOCKTEST_CLIENTS", "../clients")
	o := DefaultOptions()
	o.ExternalClients, o.Classes = []string{"kazoo"}, []Class{ClassClientPause}
	jobs, err := Plan(o)
	if err != nil {
		t.Fatal(err)
	}
	var probes []string
	for _, j := range jobs {
		if j.Impl != "kazoo" || j.Config.Client != "kazoo" || j.Config.Impl != "" {
			t.Fatalf("job %s: impl %q, client %q: want every job kazoo's, run by its manifest", j.Label(), j.Config.Impl, j.Config.Client)
		}
		if !strings.HasPrefix(j.Config.Command, "locktest run --client kazoo ") {
			t.Errorf("job %s: command %q", j.Label(), j.Config.Command)
		}
		probes = append(probes, j.Label())
	}
	// Whether kazoo gives fencing tokens is known once it is probed: its
	// fenced run is planned, and n/a when it gives none.
	want := []string{"kazoo perf-1 seed 1", "kazoo perf-8 seed 1", "kazoo none seed 1", "kazoo client-pause seed 1", "kazoo client-pause-fenced seed 1", "kazoo deadlock seed 1"}
	if !slices.Equal(probes, want) {
		t.Errorf("jobs %q, want %q", probes, want)
	}
	o.ExternalClients = []string{"no-such-client"}
	if _, err := Plan(o); err == nil || !strings.Contains(err.Error(), "--client") {
		t.Errorf("an unknown client: %v, want an error naming --client", err)
	}
}

// Under kill/restart a holder's critical section outlasts the node's
// restart and its lease outlasts the section, so that the fault, not the
// lease, is what can break mutual exclusion; its command says so. On a
// one-node backend, whose one node is the lock service, every section
// outlasts the restart (its shortest one too), and the run is long enough
// for a few of them.
func TestKillRestartSectionsOutlastTheRestart(t *testing.T) {
	for _, tc := range []struct {
		impl    string
		oneNode bool
	}{{"redis-set-nx-px", true}, {"mysql-get-lock", true}, {"etcd-mutex", false}} {
		o := DefaultOptions()
		o.Impls, o.Classes = []string{tc.impl}, []Class{ClassKillRestart}
		jobs, err := Plan(o)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, j := range jobs {
			c := j.Config
			switch {
			case j.Probe == ProbeSafety && j.Class == ClassKillRestart:
				found = true
				down := nemesis.Down.Of(c.FaultSettings)
				if c.Work <= down || c.TTL < 2*c.Work || !strings.Contains(c.Command, "--work "+c.Work.String()) || !strings.Contains(c.Command, "--ttl "+c.TTL.String()) {
					t.Errorf("%s kill-restart job: work %v, down %v, ttl %v, command %q", tc.impl, c.Work, down, c.TTL, c.Command)
				}
				if tc.oneNode && (c.WorkMin <= down+down/2 || c.Duration < OneNodeKillRestartTime || !strings.Contains(c.Command, "--work-min "+c.WorkMin.String())) {
					t.Errorf("%s kill-restart job: work-min %v, down %v, time %v, command %q", tc.impl, c.WorkMin, down, c.Duration, c.Command)
				}
				if !tc.oneNode && (c.WorkMin != 0 || c.Duration != o.Duration) {
					t.Errorf("%s kill-restart job: work-min %v, time %v; want 0 and %v", tc.impl, c.WorkMin, c.Duration, o.Duration)
				}
				// A one-node backend has no availability column to
				// measure: its runs stop at their first violation.
				if c.StopOnViolation != tc.oneNode {
					t.Errorf("%s kill-restart job: stop-on-violation %v, want %v", tc.impl, c.StopOnViolation, tc.oneNode)
				}
			case j.Timed() || j.Probe == ProbeReentrant:
				// The tight retry their figures were always measured with.
				if c.Work != 0 || c.WorkMin != 0 || c.Retry != PerfRetry || c.TTL != o.TTL || !strings.Contains(c.Command, "--retry "+PerfRetry.String()+" --backoff uniform") || strings.Contains(c.Command, "--work") {
					t.Errorf("%s: work %v, work-min %v, retry %v, ttl %v, command %q; want 0, 0, %v and %v", j.Label(), c.Work, c.WorkMin, c.Retry, c.TTL, c.Command, PerfRetry, o.TTL)
				}
			case c.Work != Work || c.WorkMin != 0 || c.Retry != Retry || c.TTL != o.TTL || !strings.Contains(c.Command, "--retry "+Retry.String()+" --backoff uniform") || !strings.Contains(c.Command, "--work "+Work.String()):
				t.Errorf("%s: work %v, work-min %v, retry %v, ttl %v, command %q; want %v, 0, %v and %v", j.Label(), c.Work, c.WorkMin, c.Retry, c.TTL, c.Command, Work, Retry, o.TTL)
			}
		}
		if !found {
			t.Errorf("%s: no kill-restart safety job", tc.impl)
		}
	}
}

// TestPlanLeavesOutWhatThisHostHasNotBuilt: a matrix of every impl leaves
// out the impls whose server locktest builds itself where this host has
// not built it (LeftOut names the make target), and plans them once it
// has; an impl named in Impls is always planned.
func TestPlanLeavesOutWhatThisHostHasNotBuilt(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("LOCKTEST_CACHE", cache)
	t.Setenv("PATH", t.TempDir())
	o := DefaultOptions()
	o.Classes = []Class{ClassNone}
	planned := func(o Options) map[string]bool {
		jobs, err := Plan(o)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		for _, j := range jobs {
			got[j.Impl] = true
		}
		return got
	}
	if why := LeftOut("k8s-lease-cas"); !strings.Contains(why, "make kube-apiserver") {
		t.Errorf("LeftOut(k8s-lease-cas) = %q, want the make target named", why)
	}
	if got := planned(o); got["k8s-lease-cas"] || got["k8s-leader-election"] || !got["redis-set-nx-px"] {
		t.Errorf("without a built apiserver the matrix plans %v", slices.Sorted(maps.Keys(got)))
	}
	var said strings.Builder
	SayLeftOut(&said, o)
	if !strings.Contains(said.String(), "matrix: leaving out k8s-lease-cas: ") || strings.Contains(said.String(), "redis-set-nx-px") {
		t.Errorf("SayLeftOut said %q", said.String())
	}
	o.Impls = []string{"k8s-lease-cas"}
	if got := planned(o); !got["k8s-lease-cas"] {
		t.Errorf("an impl named is not planned: %v", got)
	}
	said.Reset()
	if SayLeftOut(&said, o); said.Len() > 0 {
		t.Errorf("SayLeftOut of named impls said %q", said.String())
	}
	o.Impls = nil
	bin := filepath.Join(cache, "kube-apiserver", backend.KubeVersion, "kube-apiserver")
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if why := LeftOut("k8s-lease-cas"); why != "" {
		t.Errorf("LeftOut with the apiserver built: %q", why)
	}
	if got := planned(o); !got["k8s-lease-cas"] || !got["k8s-leader-election"] {
		t.Errorf("with the apiserver built the matrix plans %v", slices.Sorted(maps.Keys(got)))
	}
}

// TestPlanGivesPersistenceToTheBackendsThatHaveIt: a matrix set up as a
// deployment (--persistence always) runs the Redis impls with it, says so
// in each run's command, and leaves the backends without the setting as
// they are; a value that is none is refused.
func TestPlanGivesPersistenceToTheBackendsThatHaveIt(t *testing.T) {
	o := DefaultOptions()
	o.Impls, o.Classes, o.Base.Persistence = []string{"redis-set-nx-px", "etcd-mutex"}, []Class{ClassNone}, "always"
	jobs, err := Plan(o)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		want := ""
		if j.Impl == "redis-set-nx-px" {
			want = "always"
		}
		if j.Config.Persistence != want || strings.Contains(j.Config.Command, "--persistence always") != (want != "") {
			t.Errorf("%s %s: persistence %q, command %q; want %q", j.Impl, j.Probe, j.Config.Persistence, j.Config.Command, want)
		}
	}
	o.Base.Persistence = "sometimes"
	if _, err := Plan(o); err == nil || !strings.Contains(err.Error(), `--persistence must be off, everysec, always, got "sometimes"`) {
		t.Errorf("--persistence sometimes: %v", err)
	}
}

// TestPlanFencedColumn: the fenced client-pause jobs exist for the fenced
// impls only, with resource mode fenced; --resource none leaves them out,
// as does a matrix without the client-pause class; the column follows.
func TestPlanFencedColumn(t *testing.T) {
	fencedJobs := func(o Options) []string {
		jobs, err := Plan(o)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, j := range jobs {
			if j.Class == ClassClientPauseFenced {
				if j.Probe != ProbeSafety || j.Config.Mode != workloads.ModeFenced || !mustLookup(t, j.Impl).Fenced {
					t.Errorf("%s: probe %s mode %s", j.Label(), j.Probe, j.Config.Mode)
				}
				out = append(out, j.Label())
			}
		}
		return out
	}
	o := DefaultOptions()
	o.Impls, o.Seeds = []string{"redis-set-nx-px", "redlock", "mysql-get-lock", "etcd-mutex"}, 2
	want := []string{"redis-set-nx-px client-pause-fenced seed 1", "redis-set-nx-px client-pause-fenced seed 2",
		"etcd-mutex client-pause-fenced seed 1", "etcd-mutex client-pause-fenced seed 2"}
	if got := fencedJobs(o); !slices.Equal(got, want) {
		t.Errorf("fenced jobs %q, want %q", got, want)
	}
	if !slices.ContainsFunc(Columns(o.ColumnClasses()), func(c reports.MatrixColumn) bool { return c.Key == ColFenced }) {
		t.Error("no saved-by-fencing column by default")
	}
	for _, c := range Columns(o.ColumnClasses()) {
		if c.Key == SafetyColumn(ClassClientPauseFenced) {
			t.Error("the fenced variant made a mutex column")
		}
	}
	o.Resource = workloads.ModeNone
	if got := fencedJobs(o); len(got) > 0 || slices.Contains(o.ColumnClasses(), ClassClientPauseFenced) {
		t.Errorf("--resource none: fenced jobs %q, classes %v", got, o.ColumnClasses())
	}
	o.Resource, o.Classes = workloads.ModeFenced, []Class{ClassNodePause}
	if got := fencedJobs(o); len(got) > 0 || slices.Contains(o.ColumnClasses(), ClassClientPauseFenced) {
		t.Errorf("no client-pause class: fenced jobs %q", got)
	}
	for _, bad := range []workloads.Mode{workloads.ModeCheckAndSet, workloads.ModeEtcdGuarded, "nonsense"} {
		o.Resource = bad
		if _, err := Plan(o); err == nil || !strings.Contains(err.Error(), "--resource") {
			t.Errorf("--resource %s: %v, want a refusal naming --resource", bad, err)
		}
	}
}

// TestPlanDeployment: --cluster-opt reaches the jobs whose backend reads
// it and no other, a param no backend reads and an image of a backend
// the matrix does not run are refused, and --impl-opt needs one impl.
func TestPlanDeployment(t *testing.T) {
	o := DefaultOptions()
	o.Impls, o.Classes = []string{"redis-set-nx-px", "nats-kv"}, []Class{ClassClientPause}
	o.Base.ClusterParams = map[string]string{"sync": "always"}
	jobs, err := Plan(o)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		has := j.Config.ClusterParams["sync"] == "always" && strings.Contains(j.Config.Command, "--cluster-opt sync=always")
		if reads := j.Impl == "nats-kv"; has != reads && j.Probe != ProbeReentrant {
			t.Errorf("%s: cluster params %v, command %q", j.Label(), j.Config.ClusterParams, j.Config.Command)
		}
	}
	o.Base.ClusterParams = map[string]string{"no-such-param": "1"}
	if _, err := Plan(o); err == nil || !strings.Contains(err.Error(), "--cluster-opt no-such-param changes nothing") {
		t.Errorf("an unread cluster param: %v", err)
	}
	o.Base.ClusterParams = nil
	o.Base.ImplParams = map[string]string{"unlock": "library"}
	if _, err := Plan(o); err == nil || !strings.Contains(err.Error(), "--impl-opt") {
		t.Errorf("impl params in a matrix of two impls: %v", err)
	}
	o.Impls = []string{"etcd-mutex"}
	jobs, err = Plan(o)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if j.Probe != ProbeReentrant && (j.Config.ImplParams["unlock"] != "library" || !strings.Contains(j.Config.Command, "--impl-opt unlock=library")) {
			t.Errorf("%s: impl params %v, command %q", j.Label(), j.Config.ImplParams, j.Config.Command)
		}
	}
}
