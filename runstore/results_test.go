package runstore

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/locktest/locktest/checker"
)

func TestMet(t *testing.T) {
	for _, tc := range []struct {
		expect string
		valid  checker.Verdict
		want   bool
	}{
		{"valid", checker.Valid, true},
		{"valid", checker.Invalid, false},
		{"valid", checker.Unknown, false},
		{"", checker.Valid, true}, // valid is the default
		{"", checker.Invalid, false},
		{"", checker.Unknown, false},
		{"invalid", checker.Invalid, true},
		{"invalid", checker.Valid, false},
		{"invalid", checker.Unknown, false},
	} {
		r := Results{Run: RunInfo{Expect: tc.expect}, Valid: tc.valid}
		if got := r.Met(); got != tc.want {
			t.Errorf("expect %q, verdict %s: Met() = %v, want %v", tc.expect, tc.valid, got, tc.want)
		}
	}
}

func TestUnknownWhy(t *testing.T) {
	undecided := []checker.Result{{Checker: "mutual-exclusion", Valid: checker.Valid}, {Checker: "liveness", Valid: checker.Unknown}, {Checker: "fencing-tokens", Valid: checker.Unknown}}
	for _, tc := range []struct {
		name string
		r    Results
		want string
	}{
		{"one problem", Results{Problems: []string{"fault pause-client was not applied"}, Checkers: undecided}, "fault pause-client was not applied"},
		{"three problems", Results{Problems: []string{"a", "b", "c"}}, "a (and 2 more problems)"},
		{"undecided checkers", Results{Checkers: undecided}, "checkers could not decide: liveness, fencing-tokens"},
		{"nothing said", Results{}, "a checker could not decide"},
	} {
		if got := tc.r.UnknownWhy(); got != tc.want {
			t.Errorf("%s: UnknownWhy() = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func sampleResults() Results {
	return Results{
		Run: RunInfo{
			Name: "redlock-pause", Impl: "redlock", ImplDoc: "Redlock over 5 masters", Backend: "redis",
			Nodes: 5, Faults: []string{"pause-client"}, Clients: 3, Locks: 1, TTL: "1s", Duration: "10s",
			Seed: 7, Mode: "counter", PausePoint: "before-write", ClientPause: "2s",
			Command: "locktest run --impl redlock --seed 7", Version: "v0.1.0",
			Started: "2025-01-02T03:04:05Z", Elapsed: "10.2s", Expect: "invalid",
			Errors: []string{"worker p2 exited"},
		},
		Valid: checker.Invalid,
		Checkers: []checker.Result{
			{Checker: "mutual-exclusion", Valid: checker.Invalid,
				Anomalies: []checker.Anomaly{{Kind: "overlapping-holds", Ops: []int{1, 3}, Explanation: "p1 and p2 both held l"}},
				Notes:     []checker.Anomaly{{Kind: "expired-lease", Ops: []int{4}, Explanation: "p1 held past its lease"}},
				Stats:     map[string]float64{"holds": 2, "overlaps": 1}, Elapsed: 1234},
			{Checker: "fencing-tokens", Valid: checker.Valid, Anomalies: []checker.Anomaly{}, Error: ""},
		},
		Stats: map[string]float64{"ops": 6, "critical_sections": 2, "seconds": 0.25},
	}
}

func TestResultsRoundTrip(t *testing.T) {
	dir := t.TempDir()
	want := sampleResults()
	if err := WriteResults(dir, want); err != nil {
		t.Fatalf("WriteResults: %v", err)
	}
	got, err := ReadResults(dir)
	if err != nil {
		t.Fatalf("ReadResults: %v", err)
	}
	if got.SchemaVersion != ResultsSchemaVersion {
		t.Errorf("schema_version %d, want %d", got.SchemaVersion, ResultsSchemaVersion)
	}
	want.SchemaVersion = ResultsSchemaVersion
	if !reflect.DeepEqual(got, want) {
		t.Errorf("round trip changed the results:\ngot  %+v\nwant %+v", got, want)
	}
	// Written through a temporary file that is gone afterwards.
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != ResultsFile {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("directory holds %v, want only %s", names, ResultsFile)
	}
	// Writing again replaces the file.
	want.Valid = checker.Valid
	if err := WriteResults(dir, want); err != nil {
		t.Fatalf("second WriteResults: %v", err)
	}
	if got, err := ReadResults(dir); err != nil || got.Valid != checker.Valid {
		t.Errorf("after a rewrite ReadResults = %s, %v; want %s", got.Valid, err, checker.Valid)
	}
}

func TestReadResultsErrors(t *testing.T) {
	t.Run("missing dir", func(t *testing.T) {
		_, err := ReadResults(filepath.Join(t.TempDir(), "no-such-run"))
		if !errors.Is(err, os.ErrNotExist) {
			t.Errorf("ReadResults of a missing dir: %v, want an error satisfying errors.Is(err, os.ErrNotExist)", err)
		}
	})
	t.Run("missing file", func(t *testing.T) {
		_, err := ReadResults(t.TempDir())
		if !errors.Is(err, os.ErrNotExist) {
			t.Errorf("ReadResults of a dir without %s: %v, want os.ErrNotExist", ResultsFile, err)
		}
	})
	t.Run("corrupt file", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, ResultsFile), []byte(`{"run": {`), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := ReadResults(dir)
		if err == nil || errors.Is(err, os.ErrNotExist) {
			t.Errorf("ReadResults of a corrupt file: %v, want a decoding error", err)
		}
	})
}

func TestWriteResultsToMissingDir(t *testing.T) {
	if err := WriteResults(filepath.Join(t.TempDir(), "gone"), sampleResults()); err == nil {
		t.Error("WriteResults into a missing directory succeeded")
	}
}

func TestReadRunInfo(t *testing.T) {
	want := sampleResults()
	dir := t.TempDir()
	if err := WriteResults(dir, want); err != nil {
		t.Fatal(err)
	}
	got, err := ReadRunInfo(dir)
	if err != nil || !reflect.DeepEqual(got, want.Run) {
		t.Fatalf("ReadRunInfo = %+v, %v; want %+v", got, err, want.Run)
	}
	info, _ := json.Marshal(want.Run)
	for _, tt := range []struct {
		name, text string
		ok         bool
	}{
		// What follows "run" is never read: here it is not even JSON.
		{"rest unread", `{"run": ` + string(info) + `, "checkers": [{{{`, true},
		{"run not first", `{"valid": "true", "stats": {"ops": 3}, "run": ` + string(info) + `}`, true},
		{"no run", `{"valid": "true"}`, true},
		{"corrupt run", `{"run": {"impl": 3}}`, false},
		{"cut short", `{"valid": "tr`, false},
		{"not an object", `[1, 2]`, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, ResultsFile), []byte(tt.text), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := ReadRunInfo(dir)
			switch {
			case tt.ok && err != nil:
				t.Errorf("ReadRunInfo: %v", err)
			case tt.ok && tt.name != "no run" && !reflect.DeepEqual(got, want.Run):
				t.Errorf("ReadRunInfo = %+v, want %+v", got, want.Run)
			case !tt.ok && (err == nil || !strings.Contains(err.Error(), ResultsFile)):
				t.Errorf("ReadRunInfo = %v, want an error naming %s", err, ResultsFile)
			}
		})
	}
	if _, err := ReadRunInfo(t.TempDir()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ReadRunInfo without results.json: %v, want os.ErrNotExist", err)
	}
}

func TestVersionsMerge(t *testing.T) {
	a := Versions{Locktest: "v1 abc", Servers: map[string]string{"redis": "7.0.15"}, Clients: map[string]string{"go-redis": "v9.1.0"}}
	b := Versions{Locktest: "v1 abc", Servers: map[string]string{"redis": "7.2.4", "etcd": "3.7.3"}}
	got := a.Merge(b).Merge(b).Merge(Versions{})
	want := Versions{Locktest: "v1 abc", Servers: map[string]string{"redis": "7.0.15, 7.2.4", "etcd": "3.7.3"}, Clients: map[string]string{"go-redis": "v9.1.0"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("merged %+v, want %+v", got, want)
	}
	if a.Servers["redis"] != "7.0.15" {
		t.Errorf("Merge changed its receiver: %v", a.Servers)
	}
	if m := (Versions{}).Merge(Versions{}); m.Servers != nil || m.Clients != nil || m.Locktest != "" {
		t.Errorf("empty merge %+v", m)
	}
}

// Runs of one name that end at once each link latest without failing, and
// the link points at one of them.
func TestLinkLatestConcurrently(t *testing.T) {
	root := t.TempDir()
	var dirs []string
	for i := range 8 {
		d, err := MakeRunDir(root, "same", time.Date(2026, 1, 1, 0, 0, i, 0, time.UTC))
		if err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, d)
	}
	errs := make(chan error, len(dirs))
	for _, d := range dirs {
		go func() { errs <- LinkLatest(d) }()
	}
	for range dirs {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	target, err := os.Readlink(filepath.Join(root, "same", Latest))
	if err != nil || !slices.Contains(dirs, filepath.Join(root, "same", target)) {
		t.Errorf("latest -> %q, %v", target, err)
	}
	if left, _ := filepath.Glob(filepath.Join(root, "same", "*.tmp")); len(left) > 0 {
		t.Errorf("temporary links left: %v", left)
	}
}

// TestReadHead reads the run, the verdict and the problems of a
// results.json without its checkers' results, and tells the results of a
// run that did not finish from those of one that did.
func TestReadHead(t *testing.T) {
	want := sampleResults()
	want.Problems = []string{Unfinished}
	info, _ := json.Marshal(want.Run)
	for _, tt := range []struct {
		name, text string
		unfinished bool
	}{
		{"as written", "", true},
		// The checkers' results are never read: here they are not JSON.
		{"checkers unread", `{"run": ` + string(info) + `, "valid": "true", "problems": ["x"], "checkers": [{{{`, false},
		{"unfinished, rest unread", `{"run": ` + string(info) + `, "valid": "unknown", "problems": ["` + Unfinished + `"], "checkers": [{{{`, true},
		{"checked once", `{"run": {"errors": ["` + UnfinishedChecked + `"]}, "valid": "false"}`, true},
		{"no problems", `{"run": ` + string(info) + `, "valid": "true"}`, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if tt.text == "" {
				if err := WriteResults(dir, want); err != nil {
					t.Fatal(err)
				}
			} else if err := os.WriteFile(filepath.Join(dir, ResultsFile), []byte(tt.text), 0o644); err != nil {
				t.Fatal(err)
			}
			h, err := ReadHead(dir)
			if err != nil {
				t.Fatalf("ReadHead: %v", err)
			}
			if h.Unfinished() != tt.unfinished {
				t.Errorf("Unfinished() = %v, want %v (head %+v)", h.Unfinished(), tt.unfinished, h)
			}
			if tt.text == "" && (!reflect.DeepEqual(h.Run, want.Run) || h.Valid != want.Valid || !slices.Equal(h.Problems, want.Problems)) {
				t.Errorf("ReadHead = %+v, want the run, verdict and problems of %+v", h, want)
			}
		})
	}
	if _, err := ReadHead(t.TempDir()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ReadHead without results.json: %v, want os.ErrNotExist", err)
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, ResultsFile), []byte(`{"run": {"impl": 3}}`), 0o644)
	if _, err := ReadHead(dir); err == nil || !strings.Contains(err.Error(), ResultsFile) {
		t.Errorf("ReadHead of a corrupt run = %v, want an error naming %s", err, ResultsFile)
	}
}

// TestStallMayBreakLease checks the half-lease bound the run's warnings,
// the reports and the matrix share.
func TestStallMayBreakLease(t *testing.T) {
	for _, tc := range []struct {
		d, ttl time.Duration
		want   bool
	}{
		{249 * time.Millisecond, 500 * time.Millisecond, false},
		{250 * time.Millisecond, 500 * time.Millisecond, true},
		{time.Second, 500 * time.Millisecond, true},
		{time.Second, 0, false},
	} {
		if got := StallMayBreakLease(tc.d, tc.ttl); got != tc.want {
			t.Errorf("StallMayBreakLease(%v, %v) = %v, want %v", tc.d, tc.ttl, got, tc.want)
		}
	}
}
