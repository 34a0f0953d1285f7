package runstore

import (
	"bufio"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/locktest/locktest/checker"
)

// ClientInfo is an external lock client as its program described itself
// in the client protocol's hello_ok.
type ClientInfo struct {
	// Command is the program and its arguments.
	Command string `json:"command"`
	// Library and Version are the library it wraps and its version.
	Library string `json:"library"`
	Version string `json:"version"`
	// Fenced, Expires and Blocking are its capabilities: its leases carry
	// fencing tokens, end by themselves, and its acquire waits.
	Fenced   bool `json:"fenced"`
	Expires  bool `json:"expires"`
	Blocking bool `json:"blocking"`
}

// Versions are what a run ran, so that a result can be quoted with the
// software it was made with: locktest's own version, each lock server's
// version as the server itself reports it, and each client library's.
type Versions struct {
	// Locktest is locktest's version and commit (Version).
	Locktest string `json:"locktest"`
	// Servers maps a server product ("redis", "etcd", "zookeeper",
	// "mariadb", "postgresql") to the version its running nodes reported.
	// A server that could not be asked maps to "unknown: " and the reason.
	Servers map[string]string `json:"servers,omitempty"`
	// Clients maps a client library (a Go module path, or an external
	// client's library name) to its version.
	Clients map[string]string `json:"clients,omitempty"`
}

// RunInfo describes how a run was made, so it can be reproduced.
type RunInfo struct {
	// Versions are the versions of locktest, the servers and the client
	// libraries of the run; empty in the results of older runs.
	Versions Versions `json:"versions"`
	Name     string   `json:"name"`
	Impl     string   `json:"impl"`
	ImplDoc  string   `json:"impl_doc,omitempty"`
	// Notices says what tells a holder of the impl that its lease is lost
	// (impls.Impl.Notices, or an external client's notices capability),
	// as lost notices in the history; empty when it sends none.
	Notices string `json:"notices,omitempty"`
	// Client describes the external lock client that took the place of a
	// Go impl, as it described itself; nil for a Go impl.
	Client      *ClientInfo `json:"client,omitempty"`
	Backend     string      `json:"backend"`
	Nodes       int         `json:"nodes"`
	Faults      []string    `json:"faults"`
	Clients     int         `json:"clients"`
	Locks       int         `json:"locks"`
	TTL         string      `json:"ttl"`
	Duration    string      `json:"duration"`
	Seed        int64       `json:"seed"`
	Mode        string      `json:"resource_mode"`
	PausePoint  string      `json:"pause_point,omitempty"`
	ClientPause string      `json:"client_pause,omitempty"`
	// Targets, ClockDirection, Partition and Stagger are the fault settings
	// that pin a scenario's faults: what each fault may hit, which way clock
	// faults jump, the explicit partition, the wait between combined parts.
	Targets        map[string][]string `json:"targets,omitempty"`
	ClockDirection string              `json:"clock_direction,omitempty"`
	Partition      [][]string          `json:"partition,omitempty"`
	Stagger        string              `json:"stagger,omitempty"`
	// Provider is what ran the nodes: "local" (processes on the host) or
	// "docker" (containers); empty in the results of older runs.
	Provider string `json:"provider,omitempty"`
	// Image is the container image the nodes ran, under the docker
	// provider.
	Image string `json:"image,omitempty"`
	// Network says where nodes and clients ran: "loopback", the network
	// namespaces' subnet, or the run's Docker network.
	Network string `json:"network,omitempty"`
	// Lab is the id of the run's network lab; every namespace, link and
	// rule it made carries it (see `locktest cleanup`).
	Lab string `json:"lab,omitempty"`
	// Clock says whether nodes ran under the clock shim, or why not.
	Clock       string `json:"clock,omitempty"`
	Command     string `json:"command"`
	Version     string `json:"version"`
	Started     string `json:"started"` // wall-clock start, RFC 3339
	Elapsed     string `json:"elapsed"`
	Interrupted bool   `json:"interrupted,omitempty"`
	// Expect is the verdict the run was expected to give: "valid" (the
	// default) or "invalid" (a scenario meant to reproduce an anomaly).
	Expect string `json:"expect"`
	// Settings are every setting of the run (run.Settings) by its key, as
	// its flag would take it: the complete record of how the run was made,
	// from the one settings table. The fields above are the subset the
	// reports show, kept for the runs stored before Settings existed.
	Settings map[string]string `json:"settings,omitempty"`
	// Errors are problems of the run itself (a fault that could not be
	// healed, a worker protocol error) that make its history suspect.
	Errors []string `json:"errors,omitempty"`
	// StoppedEarly, for a run with --stop-on-violation, says how it was
	// stopped at its first violation, or why it was not.
	StoppedEarly string `json:"stopped_early,omitempty"`
	// Shrunk, on a replay of a shrunk schedule (`locktest shrink`), says
	// what it was shrunk from; nil on every other run.
	Shrunk *Shrunk `json:"shrunk,omitempty"`
	// Stalls is how promptly the machine ran a process while the
	// workload ran (nil in runs stored before it was measured).
	Stalls *Stalls `json:"stalls,omitempty"`
	// Cluster says how a run of a series that keeps its clusters
	// (run.Clusters: the matrix) came by its cluster and what became of
	// it; nil for a run that started and stopped a cluster of its own.
	Cluster *ClusterInfo `json:"cluster,omitempty"`
}

// ClusterInfo is how a run came by its cluster when a series of runs
// keeps started clusters to reuse them (run.Clusters), and whether the
// run gave it back.
type ClusterInfo struct {
	// Reused says the cluster served earlier runs: RunsBefore of them,
	// the first in the folder StartedBy, whose logs/ holds the nodes'
	// logs up to this run. This run's logs/ holds only what the nodes
	// logged while it had the cluster.
	Reused     bool   `json:"reused"`
	RunsBefore int    `json:"runs_before"`
	StartedBy  string `json:"started_by,omitempty"`
	// Reset says how the cluster's data was returned to a fresh start's
	// before the run, and how that was proven: "checked: no residue", and
	// "checked: no residue; network lab as made" for a cluster taken with
	// the network lab its nodes are in.
	Reset string `json:"reset,omitempty"`
	// Fresh, on a run that started its cluster, says why no kept cluster
	// served it ("" when the keeper had none that matched).
	Fresh string `json:"fresh,omitempty"`
	// Kept says the run gave the cluster back for a later run; NotKept
	// says why it stopped it instead.
	Kept    bool   `json:"kept"`
	NotKept string `json:"not_kept,omitempty"`
}

// Stalls is what the driver saw of the machine while the workload ran: a
// timer of its own set every Tick, and how late it woke. A machine too
// loaded to run a process for a second stops every process of the run
// alike (clients, servers and the driver), as a GC pause would, with no
// fault planned: a lease shorter than Longest may break with no fault at
// all. The figures change no verdict; they say what the machine did.
type Stalls struct {
	// Tick is the timer's period; Over is the lateness from which a
	// wake-up counts as a stall.
	Tick string `json:"tick"`
	Over string `json:"over"`
	// Count counts the stalls; Longest is the longest one's lateness
	// ("0s" when none) and LongestAt when it began, on the history's
	// clock.
	Count     int    `json:"count"`
	Longest   string `json:"longest"`
	LongestAt string `json:"longest_at,omitempty"`
	// Top are the longest stalls, five at most, in time order.
	Top []Stall `json:"top,omitempty"`
	// P99 is the lateness that 99% of the timer's wake-ups stayed within,
	// as the upper edge of a bucket (1, 2, 5, 10, 20, 50, 100 ms, or Over
	// when more came later): how promptly the machine ran the run's
	// processes short of a stall. Empty in runs stored before it was
	// measured.
	P99 string `json:"p99,omitempty"`
	// Disk is how promptly the disk synced while the workload ran (nil in
	// runs stored before it was measured, or where no probe file could be
	// written).
	Disk *DiskStalls `json:"disk,omitempty"`
	// Hosts is how promptly the hosts of the ssh provider answered while
	// the workload ran (nil for the other providers, and in runs stored
	// before it was measured).
	Hosts *HostStalls `json:"hosts,omitempty"`
}

// HostStalls is what the driver saw of the ssh provider's hosts while the
// workload ran: each connection sends a keepalive every Every, and the
// slowest round trip says how long a host's sshd went without answering.
// A host starved of CPU (containers of a loaded machine) answers late
// while the driver's own timer runs on time, and a fault's or a node's
// command over SSH waits as long. The figures change no verdict.
type HostStalls struct {
	Every string `json:"every"`
	// Longest is the slowest keepalive round trip of any host, Host that
	// host and LongestAt when the keepalive was sent, on the history's
	// clock.
	Longest   string `json:"longest"`
	Host      string `json:"host,omitempty"`
	LongestAt string `json:"longest_at,omitempty"`
}

// DiskStalls is what the driver saw of the disk while the workload ran:
// every Every it wrote a few bytes to a file of its own beside the run's
// and synced them (fdatasync), as a lock service syncs its log before it
// answers a write. A sync that takes a second holds up every write of a
// ZooKeeper or etcd node on the same disk for as long, with no fault
// planned: sessions and leases may expire, and a fault-free run may find
// no lock to take. Like the timer's stalls, the figures change no
// verdict.
type DiskStalls struct {
	// Every is the probe's period and Over the sync time from which a
	// sync counts as a stall.
	Every string `json:"every"`
	Over  string `json:"over"`
	// Syncs counts the probe's syncs, Count those that took Over or
	// longer; Longest is the longest sync ("0s" when none was slow) and
	// LongestAt when it began, on the history's clock.
	Syncs     int    `json:"syncs"`
	Count     int    `json:"count"`
	Longest   string `json:"longest"`
	LongestAt string `json:"longest_at,omitempty"`
	// Top are the longest slow syncs, five at most, in time order.
	Top []Stall `json:"top,omitempty"`
}

// Stall is one late wake-up of the stall watch: when it began, on the
// history's clock, and how late it came.
type Stall struct {
	At     string `json:"at"`
	Length string `json:"length"`
}

// LatenessP99 is the lateness that 99% of the stall watch's wake-ups
// stayed within (Stalls.P99); 0 where it was not measured.
func (r RunInfo) LatenessP99() time.Duration {
	if r.Stalls == nil {
		return 0
	}
	d, _ := time.ParseDuration(r.Stalls.P99)
	return d
}

// LongestStall is the longest stall of the driver's timer the run
// measured, 0 when it measured none or did not measure.
func (r RunInfo) LongestStall() time.Duration {
	if r.Stalls == nil {
		return 0
	}
	d, _ := time.ParseDuration(r.Stalls.Longest)
	return d
}

// StallMayBreakLease reports whether a stall of length d (the machine's,
// the disk's or a host's) may break a lease of ttl with no fault: half the
// lease or more, since a holder not run for half its lease may lose it.
// It is false when ttl is not positive.
func StallMayBreakLease(d, ttl time.Duration) bool { return ttl > 0 && d >= ttl/2 }

// LongestDiskStall is the longest sync of the disk probe the run measured
// over its threshold, 0 when none was slow or the disk was not measured.
func (r RunInfo) LongestDiskStall() time.Duration {
	if r.Stalls == nil || r.Stalls.Disk == nil {
		return 0
	}
	d, _ := time.ParseDuration(r.Stalls.Disk.Longest)
	return d
}

// LongestHostStall is the slowest keepalive round trip of the ssh
// provider's hosts during the workload, 0 for the other providers.
func (r RunInfo) LongestHostStall() time.Duration {
	if r.Stalls == nil || r.Stalls.Hosts == nil {
		return 0
	}
	d, _ := time.ParseDuration(r.Stalls.Hosts.Longest)
	return d
}

// Shrunk says how a run's schedule came from a shrink (`locktest
// shrink`): which stored run it started from, the anomaly it kept, the
// sizes before and after, and how often the smallest schedule failed the
// same way again when replayed after the search.
type Shrunk struct {
	// From is the stored run the search started from; Search is the
	// search's folder (shrink.json and every candidate's replays).
	From   string `json:"from"`
	Search string `json:"search"`
	// Checker and Kind are the anomaly every accepted candidate showed.
	Checker string `json:"checker"`
	Kind    string `json:"kind"`
	// Before and After are the sizes of the stored run and of the
	// smallest schedule.
	Before ShrinkSize `json:"before"`
	After  ShrinkSize `json:"after"`
	// Replays counts the search's replays; Need of Replays is its rule.
	Replays     int  `json:"replays"`
	Need        int  `json:"need"`
	OfReplays   int  `json:"of_replays"`
	BudgetSpent bool `json:"budget_spent,omitempty"`
	// Reproduced of Confirmations is how many replays of the smallest
	// schedule, made after the search and counted whole, failed the same
	// way.
	Reproduced    int `json:"reproduced"`
	Confirmations int `json:"confirmations"`
	// Story says the smallest failing story in one sentence.
	Story string `json:"story,omitempty"`
}

// ShrinkSize is a run's size as a shrink counts it.
type ShrinkSize struct {
	Faults  int    `json:"faults"`
	Time    string `json:"time"`
	Clients int    `json:"clients"`
	Locks   int    `json:"locks"`
}

// Summary says in one line what the shrink did: "shrunk from RUN: 23 → 1
// faults, 30s → 4s, 8 → 2 clients, 61 replays".
func (s Shrunk) Summary() string {
	out := fmt.Sprintf("shrunk from %s: %d → %d faults, %s → %s, %d → %d clients", s.From, s.Before.Faults, s.After.Faults,
		s.Before.Time, s.After.Time, s.Before.Clients, s.After.Clients)
	if s.Before.Locks != s.After.Locks {
		out += fmt.Sprintf(", %d → %d locks", s.Before.Locks, s.After.Locks)
	}
	out += fmt.Sprintf(", %d replays", s.Replays)
	if s.BudgetSpent {
		out += " (the budget ran out)"
	}
	return out
}

// ResultsSchemaVersion is the version of results.json's layout
// (docs/schemas/results.schema.json). It grows by one with every change a
// reader could trip on; results written before it existed have none (0).
const ResultsSchemaVersion = 1

// Results is the content of results.json.
type Results struct {
	Run RunInfo `json:"run"`
	// SchemaVersion is ResultsSchemaVersion when written.
	SchemaVersion int             `json:"schema_version"`
	Valid         checker.Verdict `json:"valid"`
	// Problems are reasons the run tested less than it meant to: the run's
	// own errors, no successful acquire, faults asked for but none applied.
	// Any problem makes a valid verdict unknown.
	Problems []string           `json:"problems,omitempty"`
	Checkers []checker.Result   `json:"checkers"`
	Stats    map[string]float64 `json:"stats"`
}

// Facts are what checker.Decide needs to know of the run besides its
// history. serverSessions says whether the run's locks, when they are not
// leases, are sessions of one server, which a crash of its node ends: a
// fact of the run's backend, which its caller asks the backend's registry
// (backend.ServerSessionsOf(r.Backend, r.Nodes)); false for a history
// checked without results.json.
func (r RunInfo) Facts(serverSessions bool) checker.RunFacts {
	return checker.RunFacts{Mode: r.Mode, Faults: r.Faults, Errors: r.Errors, Interrupted: r.Interrupted,
		ServerSessions: serverSessions}
}

// New returns the results of a run made as info and decided as d.
func New(info RunInfo, d checker.Decision) Results {
	return Results{Run: info, Valid: d.Valid, Problems: d.Problems, Checkers: d.Results, Stats: d.Stats}
}

// Undecided names the checkers whose verdict is unknown, in order.
func (r Results) Undecided() []string {
	var out []string
	for _, c := range r.Checkers {
		if c.Valid == checker.Unknown {
			out = append(out, c.Checker)
		}
	}
	return out
}

// UnknownWhy says in one line why a run's verdict is unknown: its first
// problem (with how many more there are), else the checkers that could not
// decide.
func (r Results) UnknownWhy() string {
	switch {
	case len(r.Problems) == 1:
		return r.Problems[0]
	case len(r.Problems) > 1:
		return fmt.Sprintf("%s (and %d more problems)", r.Problems[0], len(r.Problems)-1)
	case len(r.Undecided()) > 0:
		return "checkers could not decide: " + strings.Join(r.Undecided(), ", ")
	}
	return "a checker could not decide"
}

// EffectiveFaults is how many of the run's fault windows overlapped a
// critical section (the liveness checker's faults_effective); -1 when the
// results do not say (a run without faults, or one stored before it was
// counted).
func (r Results) EffectiveFaults() int {
	if x, ok := r.Stats["faults_effective"]; ok {
		return int(x)
	}
	return -1
}

// Ineffective says why a run with faults says nothing of them, after
// Antithesis's "sometimes": none of its faults was in force while a client
// held the lock. It is "" for a run whose faults met a holder, and for
// results that do not say.
func (r Results) Ineffective() string {
	if len(r.Run.Faults) == 0 || r.EffectiveFaults() != 0 {
		return ""
	}
	return fmt.Sprintf("none of the %d faults applied was in force while a client held the lock: they had no chance to matter", int(r.Stats["faults_injected"]))
}

// Met reports whether the results match the run's expectation.
func (r Results) Met() bool {
	if r.Run.Expect == "invalid" {
		return r.Valid == checker.Invalid
	}
	return r.Valid == checker.Valid
}

// WriteResults writes dir/results.json, of schema ResultsSchemaVersion.
func WriteResults(dir string, r Results) error {
	r.SchemaVersion = ResultsSchemaVersion
	return WriteJSON(filepath.Join(dir, ResultsFile), r)
}

// ReadResults reads dir/results.json. A missing file gives zero results and
// an error satisfying errors.Is(err, os.ErrNotExist).
func ReadResults(dir string) (Results, error) {
	var r Results
	return r, ReadJSON(filepath.Join(dir, ResultsFile), &r)
}

// ReadRunInfo reads only the run's description from dir's results.json:
// its "run" field, which WriteResults puts first, through ReadHead, so
// that the anomalies after it (30 MB of them for 95,000) are not read at
// all. Errors are as
// ReadResults's; a file without a "run" field gives the zero RunInfo.
func ReadRunInfo(dir string) (RunInfo, error) {
	h, err := ReadHead(dir)
	return h.Run, err
}

// Unfinished is the problem that results.json names while a run goes: the
// driver writes it with the run's settings before the first op, and the
// results of the finished run replace it. A results.json that still names
// it belongs to a run whose driver stopped (SIGKILL, a crash, a job
// timeout) before it checked the history; its history is a prefix.
const Unfinished = "the run did not finish: its driver stopped before checking; `locktest check` this folder"

// UnfinishedChecked is the problem `locktest check` gives a run whose
// results.json says it did not finish (see Unfinished): what it checks is a
// prefix of the run, which may hold a violation but never shows the run
// valid. It is kept among the run's errors, so that every later check of
// the folder finds it again.
const UnfinishedChecked = "the run did not finish (its driver stopped before checking): its history is only a prefix of the run, so it is never valid"

// Head is the part of results.json before the checkers' results: the run's
// description and the problems of its verdict.
type Head struct {
	Run      RunInfo
	Valid    checker.Verdict
	Problems []string
}

// Unfinished reports whether the results are those of a run that did not
// finish: they name Unfinished among their problems, or UnfinishedChecked
// among the run's errors (a check of such a run wrote them).
func (h Head) Unfinished() bool {
	return slices.Contains(h.Problems, Unfinished) || slices.Contains(h.Run.Errors, UnfinishedChecked) ||
		slices.Contains(h.Problems, UnfinishedChecked)
}

// ReadHead reads dir's results.json up to the checkers' results, which
// WriteResults puts after the run, the verdict and the problems, so that
// their anomalies are not read at all. Errors are as ReadResults's.
func ReadHead(dir string) (Head, error) {
	path := filepath.Join(dir, ResultsFile)
	f, err := os.Open(path)
	if err != nil {
		return Head{}, err
	}
	defer f.Close()
	var h Head
	bad := func(err error) (Head, error) { return Head{}, fmt.Errorf("%s: %w", path, err) }
	d := json.NewDecoder(bufio.NewReader(f))
	if t, err := d.Token(); err != nil {
		return bad(err)
	} else if t != json.Delim('{') {
		return bad(fmt.Errorf("not a JSON object"))
	}
	for d.More() {
		t, err := d.Token()
		if err != nil {
			return bad(err)
		}
		var into any
		switch t {
		case "checkers":
			return h, nil
		case "run":
			into = &h.Run
		case "valid":
			into = &h.Valid
		case "problems":
			into = &h.Problems
		default:
			into = &json.RawMessage{}
		}
		if err := d.Decode(into); err != nil {
			return bad(err)
		}
	}
	return h, nil
}

// WriteJSON writes v to path as indented JSON, atomically.
func WriteJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return WriteFileAtomic(path, append(b, '\n'))
}

// ReadJSON reads path's JSON into v. A missing file gives an error
// satisfying errors.Is(err, os.ErrNotExist); a bad one names the file.
func ReadJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// Merge returns the versions of v and w together: for each key the
// versions either has, joined in order with ", " where they differ, so
// that a scoreboard over runs of mixed versions shows every one.
func (v Versions) Merge(w Versions) Versions {
	join := func(a, b string) string {
		if a == "" || a == b {
			return b
		}
		if b == "" || slices.Contains(strings.Split(a, ", "), b) {
			return a
		}
		parts := append(strings.Split(a, ", "), b)
		slices.Sort(parts)
		return strings.Join(parts, ", ")
	}
	merge := func(a, b map[string]string) map[string]string {
		if len(a) == 0 && len(b) == 0 {
			return nil
		}
		out := maps.Clone(a)
		if out == nil {
			out = map[string]string{}
		}
		for k, x := range b {
			out[k] = join(out[k], x)
		}
		return out
	}
	return Versions{Locktest: join(v.Locktest, w.Locktest), Servers: merge(v.Servers, w.Servers), Clients: merge(v.Clients, w.Clients)}
}
