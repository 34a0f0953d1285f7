package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/locktest/locktest/reports"
	"github.com/locktest/locktest/runstore"
	"github.com/locktest/locktest/testkit/gate"
	"github.com/locktest/locktest/testkit/schemacheck"
)

// writePlan writes a plan file into dir and returns its path.
func writePlan(t *testing.T, dir, text string) string {
	t.Helper()
	path := filepath.Join(dir, "plan.yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestRunFromAPlan: a plan's impl, faults and run settings make the run,
// as their flags would, and a flag on the command line overrides the plan.
func TestRunFromAPlan(t *testing.T) {
	gate.Need(t, "redis-server")
	dir := t.TempDir()
	plan := writePlan(t, dir, `impls: [redis-set-nx-px]
faults: [pause-client]
run:
  ttl: 500ms
  time: 3s
  work: 5ms
  resource: fenced
`)
	jsonOut := filepath.Join(dir, "results.json")
	store := filepath.Join(dir, "store")
	if out, errOut, code := locktest(t, "run", "--plan", plan, "--ttl", "400ms", "--store", store, "--json", jsonOut, "-q"); code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	var res runstore.Results
	if err := runstore.ReadJSON(jsonOut, &res); err != nil {
		t.Fatal(err)
	}
	got := res.Run.Settings
	for k, want := range map[string]string{"impl": "redis-set-nx-px", "faults": "pause-client", "ttl": "400ms", "time": "3s", "work": "5ms", "resource": "fenced"} {
		if got[k] != want {
			t.Errorf("results.json settings.%s = %q, want %q", k, got[k], want)
		}
	}
}

// TestMatrixFromAPlan: a plan's impls, faults, seeds and run settings make
// the matrix; matrix.json records them.
func TestMatrixFromAPlan(t *testing.T) {
	gate.Need(t, "redis-server")
	dir := t.TempDir()
	plan := writePlan(t, dir, `impls: [redis-set-nx-px]
faults: [none]
seeds: 1
run:
  ttl: 300ms
  time: 5s
  clients: 3
`)
	store := filepath.Join(dir, "store")
	jsonOut := filepath.Join(dir, "matrix.json")
	if out, errOut, code := locktest(t, "matrix", "--plan", plan, "--store", store, "--json", jsonOut, "-q", "--parallel", "1"); code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	if err := schemacheck.ValidateFile("matrix", jsonOut); err != nil {
		t.Error(err)
	}
	var m reports.Matrix
	if err := runstore.ReadJSON(jsonOut, &m); err != nil {
		t.Fatal(err)
	}
	if len(m.Rows) != 1 || m.Rows[0].Impl != "redis-set-nx-px" || m.Header.Seeds != 1 {
		t.Fatalf("matrix.json: %d rows, seeds %d; want the plan's one impl at 1 seed", len(m.Rows), m.Header.Seeds)
	}
	for _, col := range m.Columns {
		if strings.HasPrefix(col.Key, "mutex-") && col.Key != "mutex-none" {
			t.Errorf("column %s: the plan asked for no fault class", col.Key)
		}
	}
	runs, _ := filepath.Glob(filepath.Join(store, "matrix-redis-set-nx-px-none", "2*", runstore.ResultsFile))
	if len(runs) != 1 {
		t.Fatalf("fault-free runs %v, want one", runs)
	}
	res, err := runstore.ReadResults(filepath.Dir(runs[0]))
	if err != nil {
		t.Fatal(err)
	}
	if s := res.Run.Settings; s["ttl"] != "300ms" || s["time"] != "5s" {
		t.Errorf("the run's ttl %q, time %q; want the plan's 300ms, 5s", s["ttl"], s["time"])
	}
}

// TestPlanSchema: the plans the tests run are valid against
// docs/schemas/plan.schema.json, and the schema refuses what ReadPlanFile
// refuses by field.
func TestPlanSchema(t *testing.T) {
	for _, c := range []struct {
		text string
		ok   bool
	}{
		{"impls: [redis-set-nx-px]\nfaults: [pause-client]\nrun: {ttl: 500ms, time: 3s, resource: fenced}\n", true},
		{"impls: [redis-set-nx-px]\nfaults: [none]\nseeds: 1\nrun: {ttl: 300ms, time: 5s, clients: 3}\ngates: {baseline: b/matrix.json}\n", true},
		{"impls: [redis-set-nx-px]\nmargin: {vary: pause=1500ms..2s, grid: 2, trials: 1, at: 500ms}\ngates: {margin: 3s}\n", true},
		{badPlans["plan-field.yaml"], false},
		{badPlans["plan-impl.yaml"], false},
		{"impls: [redis-set-nx-px]\nmargin: {speed: 3}\n", false},
	} {
		var v any
		if err := yaml.Unmarshal([]byte(c.text), &v); err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if err := schemacheck.Validate("plan", b); (err == nil) != c.ok {
			t.Errorf("%q: schema says %v, want valid %v", c.text, err, c.ok)
		}
	}
}
