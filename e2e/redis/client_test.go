package redis_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/run"
	"github.com/locktest/locktest/testkit"
	"github.com/locktest/locktest/testkit/gate"
	"github.com/locktest/locktest/testkit/testexe"
	"github.com/locktest/locktest/workloads"
)

// clientPath returns the absolute path of a file of the repository's
// clients/ folder.
func clientPath(t testing.TB, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "..", "clients", name))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// needPython skips t unless Debian's python3 can import every module.
func needPython(t testing.TB, modules ...string) {
	t.Helper()
	for _, m := range modules {
		if err := exec.Command("/usr/bin/python3", "-c", "import "+m).Run(); err != nil {
			t.Skipf("/usr/bin/python3 cannot import %s (make setup)", m)
		}
	}
}

// clientConfig is a run of the external client program client against
// backend.
func clientConfig(t testing.TB, client, backend string) run.Config {
	cfg := testkit.Config(t, "")
	cfg.Client, cfg.Backend = client, backend
	return cfg
}

// TestBadClientsNeverPassAsValid drives clients that lie, print garbage,
// hang, answer the wrong request or die: each op they spoil is of unknown
// outcome with the reason, a lie is caught, a dead client is replaced, and
// no such run is valid.
func TestBadClientsNeverPassAsValid(t *testing.T) {
	gate.Need(t, "redis-server")
	needPython(t, "json")
	for _, tc := range []struct {
		mode  string
		error string // in the error of an info acquire
		kind  string // an anomaly the checkers must find
	}{
		{"lie", "", "overlapping-holds"},
		{"garbage", "printed garbage", ""},
		{"hang", "did not answer acquire", ""},
		{"wrong-id", "answered request", ""},
		{"die", "worker exited", ""},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			cfg := clientConfig(t, clientPath(t, "testdata/bad_client.py"), "redis")
			cfg.ClientParams = map[string]string{"mode": tc.mode}
			cfg.Duration, cfg.Clients = 3*time.Second, 3
			if tc.mode == "lie" || tc.mode == "die" {
				// Each lie must be seen to overlap another client's
				// hold, whatever the load: every critical section lasts
				// 400 ms, so the three clients' first lying grants, made
				// within moments of each other, overlap by hundreds of
				// ms. (With the default work time, a loaded machine ran
				// the clients' short sections one after another, and a
				// die run was valid 3 times in 8 under stress-ng.) The
				// die clients die at their fourth acquire, 1.2 s in.
				cfg.Duration, cfg.Work, cfg.WorkMin = 4*time.Second, 400*time.Millisecond, 400*time.Millisecond
			}
			if tc.mode == "die" {
				// Under stress-ng the die clients reached their fourth
				// acquire only at 4.27 s, after a 4 s run had ended: no
				// death came in time to be replaced. 8 s leaves room.
				cfg.Duration = 8 * time.Second
			}
			out, err := run.Run(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if out.Results.Valid == checker.Valid {
				t.Fatalf("a %s client's run is valid: stats %v, store %s", tc.mode, out.Results.Stats, out.Dir)
			}
			if tc.kind != "" && testkit.Kinds(out.Results)[tc.kind] == 0 {
				t.Errorf("anomalies %v: want %s", testkit.Kinds(out.Results), tc.kind)
			}
			h, err := out.History()
			if err != nil {
				t.Fatal(err)
			}
			if tc.error != "" && !hasInfo(h, history.Acquire, tc.error) {
				t.Errorf("no info acquire says %q", tc.error)
			}
			if tc.mode == "die" && maxProcess(h) < cfg.Clients {
				t.Errorf("processes up to p%d: the dead clients were not replaced", maxProcess(h))
			}
			testkit.AssertNothingLeft(t, out)
		})
	}
}

// hasInfo reports whether an info completion of f has an error containing
// part.
func hasInfo(h history.History, f, part string) bool {
	for _, o := range h {
		if o.Type == history.Info && o.F == f && strings.Contains(o.Error, part) {
			return true
		}
	}
	return false
}

// maxProcess is the highest client process id in h.
func maxProcess(h history.History) int {
	m := -1
	for _, o := range h {
		if !o.IsNemesis() && o.Process > m {
			m = o.Process
		}
	}
	return m
}

// TestAClientThatCannotStartIsASetupError: a missing program, and one that
// exits before it answers hello, stop the run before it begins, with one
// line; the second's stderr is kept in the run's logs.
func TestAClientThatCannotStartIsASetupError(t *testing.T) {
	gate.Need(t, "redis-server")
	cfg := clientConfig(t, "/nonexistent/client", "redis")
	_, err := run.Run(context.Background(), cfg)
	var se *run.SetupError
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "no program /nonexistent/client") {
		t.Fatalf("missing program: %v, want a setup error naming it", err)
	}

	cfg = clientConfig(t, clientPath(t, "testdata/exit_at_start.sh"), "redis")
	_, err = run.Run(context.Background(), cfg)
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "exited before it answered hello (exit status 3): cannot start: no such library") {
		t.Fatalf("a program that exits at start: %v, want a setup error with its last stderr line", err)
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("error %q is more than one line", err)
	}
	log := err.Error()[strings.LastIndex(err.Error(), " ")+1 : len(err.Error())-1]
	b, rerr := os.ReadFile(log)
	if rerr != nil || !strings.Contains(string(b), "no such library") {
		t.Errorf("its stderr in %s: %q %v", log, b, rerr)
	}
}

// TestGoImplThroughTheProtocolIsValid runs redis-set-nx-px through the Go
// reference adapter: the protocol carries its tokens and validity, and a
// fault-free run is valid.
func TestGoImplThroughTheProtocolIsValid(t *testing.T) {
	gate.Need(t, "redis-server")
	cfg := clientConfig(t, testexe.GoRef("redis-set-nx-px"), "redis")
	cfg.Mode, cfg.Duration = workloads.ModeFenced, 3*time.Second
	out, h := testkit.MustRun(t, cfg)
	testkit.ValidWithWrites(t, out.Results, 20)
	if out.Results.Run.Impl != "goref-redis-set-nx-px" {
		t.Errorf("impl %q", out.Results.Run.Impl)
	}
	tokens, until := 0, 0
	for _, o := range h {
		if o.F == history.Acquire && o.Type == history.OK {
			if o.Value.Token != nil {
				tokens++
			}
			if o.Value.ValidUntil > 0 {
				until++
			}
		}
	}
	if tokens == 0 || until == 0 {
		t.Errorf("%d acquires with a token, %d with a validity: want both carried", tokens, until)
	}
}

// TestClientClockFaultsAreUnavailableToExternalClients: a client program
// keeps its own clock, which neither the worker's wall-clock offset nor a
// runtime locktest builds moves, so clock-skew-client and
// clock-rate-client are reported unavailable, not applied in name only,
// and the run is not valid.
func TestClientClockFaultsAreUnavailableToExternalClients(t *testing.T) {
	gate.Need(t, "redis-server")
	for _, fault := range []string{"clock-skew-client", "clock-rate-client"} {
		t.Run(fault, func(t *testing.T) {
			cfg := clientConfig(t, testexe.GoRef("redis-set-nx-px"), "redis")
			cfg.Faults, cfg.Duration, cfg.Interval = []string{fault}, 3*time.Second, 500*time.Millisecond
			out, err := run.Run(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if out.Results.Valid == checker.Valid || !strings.Contains(strings.Join(out.Results.Run.Errors, " "), fault+": fault unavailable") {
				t.Fatalf("verdict %s, problems %q: want %s unavailable and the run not valid", out.Results.Valid, out.Results.Run.Errors, fault)
			}
		})
	}
}
