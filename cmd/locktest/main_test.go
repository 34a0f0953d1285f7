package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/clusters/local/netns"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/internal/procfs"
	"github.com/locktest/locktest/runstore"
	"github.com/locktest/locktest/testkit"
	"github.com/locktest/locktest/testkit/gate"
	"github.com/locktest/locktest/testkit/schemacheck"
)

// cli is the locktest binary, built once for these tests; bin is its path.
var (
	cli testkit.CLI
	bin string
)

func TestMain(m *testing.M) {
	c, remove, err := testkit.BuildCLI()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	cli, bin = c, c.Bin
	code := m.Run()
	remove()
	os.Exit(code)
}

// locktest runs the binary and returns stdout, stderr and the exit code.
func locktest(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	return cli.Run(t, nil, args...)
}

// startLocktest starts the binary with args (testkit.CLI.Start).
func startLocktest(t *testing.T, args ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	return cli.Start(t, args...)
}

// stopLocktest sends sig to the locktest cmd and waits for it to exit
// (testkit.Stop).
func stopLocktest(t *testing.T, cmd *exec.Cmd, out *bytes.Buffer, sig os.Signal) {
	t.Helper()
	testkit.Stop(t, cmd, out, sig)
}

// storedRun returns the folder and the results of the one run stored as
// root/name.
func storedRun(t *testing.T, root, name string) (string, runstore.Results) {
	t.Helper()
	dirs, _ := filepath.Glob(filepath.Join(root, name, "2*"))
	if len(dirs) != 1 {
		t.Fatalf("run folders %v, want one", dirs)
	}
	r, err := runstore.ReadResults(dirs[0])
	if err != nil {
		t.Fatal(err)
	}
	return dirs[0], r
}

func TestBadUsageExitsTwoWithOneLine(t *testing.T) {
	root := t.TempDir()
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"run", "--clients", "many"}, `invalid argument "many" for "--clients"`},
		{[]string{"run", "--bogus"}, "unknown flag: --bogus"},
		{[]string{"run", "--impl", "nope", "--store", root}, `--impl: unknown impl "nope"`},
		{[]string{"run", "--faults", "meteor", "--store", root}, `unknown fault "meteor"`},
		{[]string{"run", "--resource", "fencing", "--store", root}, `unknown resource mode "fencing"`},
		{[]string{"run", "--ttl", "-1s", "--store", root}, "--ttl must be at least 1ms"},
		{[]string{"run", "--clients", "0", "--store", root}, "--clients must be at least 1"},
		{[]string{"run", "--time", "0", "--store", root}, "--time must be positive"},
		{[]string{"run", "--impl", "redis-naive-del", "--resource", "fenced", "--store", root}, "grants none"},
		{[]string{"run", "extra"}, "unknown command"},
		{[]string{"check"}, "accepts 1 arg(s), received 0"},
		{[]string{"check", filepath.Join(root, "missing")}, "no such file or directory"},
		{[]string{"frobnicate"}, "unknown command"},
		{[]string{"run", "--provider", "docker", "--image", "mongo=mongo:7", "--store", root}, `the docker provider has no backend "mongo"`},
		{[]string{"run", "--image", "redis=redis:7.2", "--store", root}, "--image needs --provider docker"},
		{[]string{"run", "--provider", "podman", "--store", root}, `--provider must be local, docker or ssh, got "podman"`},
		{[]string{"images", "build", "nope"}, `images build: no backend "nope"`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			_, stderr, code := locktest(t, tt.args...)
			if code != 2 {
				t.Errorf("exit %d, want 2; stderr %q", code, stderr)
			}
			if strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, tt.want) || strings.Contains(stderr, "goroutine") {
				t.Errorf("stderr %q, want one line containing %q", stderr, tt.want)
			}
		})
	}
}

func TestMissingServerBinaryExitsTwoAndLeavesNoRunFolder(t *testing.T) {
	root := t.TempDir()
	cmd := exec.Command(bin, "run", "--store", root, "--time", "1s")
	cmd.Env = append(os.Environ(), "PATH="+t.TempDir())
	var errb bytes.Buffer
	cmd.Stderr = &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Fatalf("err %v, want exit 2; stderr %q", err, errb.String())
	}
	if s := errb.String(); strings.Count(s, "\n") != 1 || !strings.Contains(s, "redis-server not found") || !strings.Contains(s, "make setup") {
		t.Errorf("stderr %q, want one line naming redis-server and make setup", s)
	}
	if ents, _ := os.ReadDir(root); len(ents) != 0 {
		t.Errorf("a run that could not start left %d entries in the store", len(ents))
	}
}

func TestHelpForEveryCommand(t *testing.T) {
	for _, c := range []string{"run", "check", "report", "list"} {
		out, _, code := locktest(t, c, "--help")
		if code != 0 || !strings.Contains(out, "Usage:") {
			t.Errorf("%s --help: exit %d, %q", c, code, out)
		}
	}
}

const goodHistory = `{"index":0,"type":"invoke","process":0,"f":"acquire","time":10,"value":{"lock":"l"}}
{"index":1,"type":"ok","process":0,"f":"acquire","time":20,"value":{"lock":"l","token":1,"lock_value":"a","valid_until":1000}}
{"index":2,"type":"invoke","process":1,"f":"acquire","time":30,"value":{"lock":"l"}}
{"index":3,"type":"ok","process":1,"f":"acquire","time":40,"value":{"lock":"l","token":2,"lock_value":"b","valid_until":1000}}
`

func writeRun(t *testing.T, content string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, runstore.HistoryFile), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestCheckRejectsCorruptHistoriesWithTheLineNumber checks histories that
// are broken in each way the format forbids: one line naming the line and
// what is wrong with it, exit 2, and the results.json and report.html of an
// earlier check left as they were.
func TestCheckRejectsCorruptHistoriesWithTheLineNumber(t *testing.T) {
	lines := strings.SplitAfter(goodHistory, "\n")
	tests := []struct {
		name, content, want string
	}{
		{"corrupted line", strings.Replace(goodHistory, `"type":"invoke","process":1`, `"type":"invoke",process:1`, 1), "line 3: not a JSON op"},
		{"negative time", strings.Replace(goodHistory, `"time":30`, `"time":-30`, 1), "line 3: negative time -30"},
		{"a process's ops out of time order", strings.Replace(goodHistory, `"time":20`, `"time":5`, 1),
			"line 2: out of time order: process 0's op at time 5 is before its previous op at time 10 (line 1)"},
		{"lines out of order", lines[0] + lines[2] + lines[1] + lines[3], "line 2: index 2, want 1"},
		{"duplicate index", lines[0] + lines[1] + lines[1] + lines[2], "line 3: index 1, want 2"},
		{"completion of an op that is not open", lines[0] + lines[1] + strings.Replace(lines[3], `"index":3`, `"index":2`, 1),
			"line 3: completion without invoke: process 1 completes acquire with ok"},
		{"a second completion", lines[0] + lines[1] + strings.Replace(lines[1], `"index":1`, `"index":2`, 1),
			"line 3: completion without invoke: process 0 completes acquire with ok"},
		{"double invoke", lines[0] + strings.Replace(lines[0], `"index":0`, `"index":1`, 1), "line 2: double invoke: process 0 invokes acquire while op 0 (acquire) is open"},
		{"unknown op type", strings.Replace(goodHistory, `"type":"invoke","process":1`, `"type":"begin","process":1`, 1), `line 3: unknown op type "begin"`},
		{"unknown field", strings.Replace(goodHistory, `"time":30`, `"time":30,"colour":"red"`, 1), `line 3: not a JSON op: json: unknown field "colour"`},
		{"value of the wrong type", strings.Replace(goodHistory, `"token":2`, `"token":"two"`, 1), "line 4: value of wrong type: value.token is a JSON string"},
		{"blank line", lines[0] + "\n" + lines[1], "line 2: not a JSON op"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeRun(t, tt.content)
			// What an earlier check wrote must survive a refused one.
			before := map[string]string{runstore.ResultsFile: `{"run":{"name":"x"},"valid":"true"}` + "\n", runstore.ReportFile: "<html>earlier</html>"}
			for f, c := range before {
				if err := os.WriteFile(filepath.Join(dir, f), []byte(c), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			stdout, stderr, code := locktest(t, "check", dir)
			want := "locktest: " + filepath.Join(dir, runstore.HistoryFile) + ": " + tt.want
			if code != 2 || !strings.HasPrefix(stderr, want) || strings.Count(stderr, "\n") != 1 || stdout != "" {
				t.Fatalf("exit %d, stdout %q, stderr %q; want 2 and %q", code, stdout, stderr, want)
			}
			for f, c := range before {
				if b, err := os.ReadFile(filepath.Join(dir, f)); err != nil || string(b) != c {
					t.Errorf("%s changed by a refused check: %q, %v", f, b, err)
				}
			}
		})
	}
}

// TestCheckReadsThePrefixOfACutHistory checks a history whose last line was
// cut short, as a crash of the machine leaves it: the ops before it are
// checked, and the cut line is a problem of the run, so the verdict is
// unknown (exit 3, inconclusive) — here on a prefix that shows a real
// overlap, invalid (exit 1).
func TestCheckReadsThePrefixOfACutHistory(t *testing.T) {
	for _, tt := range []struct {
		name, content, verdict string
		ops, code              int
	}{
		{"valid prefix", goodHistory[:strings.Index(goodHistory, `{"index":3`)+20], "unknown", 3, 3},
		{"invalid prefix", goodHistory + `{"index":4,"type":"inv`, "INVALID", 4, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeRun(t, tt.content)
			for range 2 { // a second check must not list the problem twice
				stdout, stderr, code := locktest(t, "check", dir)
				if code != tt.code || !strings.Contains(stdout, fmt.Sprintf("read %d ops", tt.ops)) ||
					!strings.Contains(stdout, fmt.Sprintf("run problem: history: line %d was cut short (truncated: the last line has no newline); the %d ops before it were checked", tt.ops+1, tt.ops)) ||
					!strings.Contains(stdout, "verdict: "+tt.verdict) {
					t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
				}
				r, err := runstore.ReadResults(dir)
				if err != nil || len(r.Run.Errors) != 1 || strings.ToUpper(string(r.Valid)) != map[string]string{"unknown": "UNKNOWN", "INVALID": "FALSE"}[tt.verdict] {
					t.Fatalf("results: %+v, %v", r, err)
				}
			}
			if _, stderr, code := locktest(t, "report", dir); code != 0 {
				t.Errorf("report of a cut history: exit %d, %s", code, stderr)
			}
		})
	}
}

func TestCheckFindsOverlapAndExitsOne(t *testing.T) {
	dir := writeRun(t, goodHistory)
	out, _, code := locktest(t, "check", dir)
	if code != 1 || !strings.Contains(out, "overlapping-holds") || !strings.Contains(out, "mutual-exclusion  INVALID") ||
		!strings.Contains(out, "read 4 ops in ") || !strings.Contains(out, "liveness") {
		t.Fatalf("exit %d, out %q", code, out)
	}
	r, err := runstore.ReadResults(dir)
	if err != nil || r.Valid != "false" {
		t.Fatalf("results %+v, %v", r.Valid, err)
	}
	if _, err := os.Stat(filepath.Join(dir, runstore.ReportFile)); err != nil {
		t.Errorf("no report: %v", err)
	}
	// report re-renders from the results.
	os.Remove(filepath.Join(dir, runstore.ReportFile))
	if _, stderr, code := locktest(t, "report", dir); code != 0 {
		t.Fatalf("report: exit %d %s", code, stderr)
	}
	b, err := os.ReadFile(filepath.Join(dir, runstore.ReportFile))
	if err != nil || !bytes.Contains(b, []byte("overlapping-holds")) {
		t.Fatalf("report lacks the anomaly: %v", err)
	}
}

// children returns the pids whose parent is pid.
func children(pid int) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		c, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// The fields after the parenthesised command: state ppid ...
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, c)
		}
	}
	return out
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	s, err := procfs.State(fmt.Sprintf("/proc/%d/stat", pid))
	return err == nil && s != 'Z'
}

func TestInterruptStopsEverythingAndKeepsTheHistory(t *testing.T) {
	gate.Need(t, "redis-server")
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) {
			root := t.TempDir()
			cmd, out := startLocktest(t, "run", "--impl", "redis-set-nx-px", "--faults", "pause-client,kill-node",
				"--ttl", "300ms", "--interval", "200ms", "--down", "200ms", "--time", "60s", "--clients", "3",
				"--store", root, "--name", "int")
			// Wait until the node and every worker run, then let faults happen.
			var kids []int
			deadline := time.Now().Add(20 * time.Second)
			for time.Now().Before(deadline) {
				kids = children(cmd.Process.Pid)
				if len(kids) >= 4 {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			if len(kids) < 4 {
				cmd.Process.Kill()
				t.Fatalf("only %d child processes started: %s", len(kids), out.String())
			}
			// Let faults happen: wait until the history shows a client
			// paused and a critical section done.
			deadline = time.Now().Add(30 * time.Second)
			for time.Now().Before(deadline) && !historyShows(root, "int", `"f":"pause-client"`, `"type":"ok","process":-1,"f":"pause-client"`) {
				time.Sleep(50 * time.Millisecond)
			}
			// A node restarted by kill-node is a new child: look again.
			for _, k := range children(cmd.Process.Pid) {
				if !slices.Contains(kids, k) {
					kids = append(kids, k)
				}
			}
			stopLocktest(t, cmd, out, sig)
			// Killed outright, the driver leaves its children to the kernel's
			// parent-death signal; give it a moment.
			deadline = time.Now().Add(5 * time.Second)
			for time.Now().Before(deadline) && slices.ContainsFunc(kids, alive) {
				time.Sleep(20 * time.Millisecond)
			}
			for _, k := range kids {
				if alive(k) {
					t.Errorf("process %d outlived the run", k)
				}
			}
			dirs, _ := filepath.Glob(filepath.Join(root, "int", "2*"))
			if len(dirs) != 1 {
				t.Fatalf("run folders %v, want one", dirs)
			}
			dir := dirs[0]
			if sig == syscall.SIGKILL {
				// The history is a checkable prefix, and results.json, written
				// at the start, still says how the run was made.
				r, err := runstore.ReadResults(dir)
				if err != nil || r.Valid != "unknown" || len(r.Problems) == 0 || r.Run.Mode != "none" {
					t.Fatalf("results of a killed run: %+v, %v", r, err)
				}
				_, stderr, code := locktest(t, "check", dir)
				if code == 2 {
					t.Fatalf("check of a killed run's history: exit 2, %s", stderr)
				}
			}
			r, err := runstore.ReadResults(dir)
			if err != nil {
				t.Fatalf("no results after %v: %v\n%s", sig, err, out.String())
			}
			if r.Stats["critical_sections"] < 1 || r.Stats["faults_injected"] < 1 {
				t.Errorf("results: %v critical sections, %v faults", r.Stats["critical_sections"], r.Stats["faults_injected"])
			}
			h, err := history.ReadFile(filepath.Join(dir, runstore.HistoryFile))
			if err != nil {
				t.Fatal(err)
			}
			paused := false
			for _, o := range h {
				paused = paused || o.IsNemesis() && o.F == "pause-client" && o.Type == history.OK
			}
			if !paused {
				t.Errorf("no client was paused before the %v", sig)
			}
			if sig == syscall.SIGKILL {
				return
			}
			if !r.Run.Interrupted {
				t.Errorf("results do not say the run was interrupted")
			}
			// Stopped early, it tested less than it was asked to: never
			// valid; a violation found before the stop is still exit 1,
			// anything else is inconclusive, exit 3.
			code := cmd.ProcessState.ExitCode()
			switch {
			case r.Valid == checker.Valid:
				t.Errorf("an interrupted run is valid (exit %d)", code)
			case !slices.Contains(r.Problems, checker.Interrupted):
				t.Errorf("problems %q do not say the run was stopped early", r.Problems)
			case r.Valid == checker.Invalid && code != 1, r.Valid == checker.Unknown && code != 3:
				t.Errorf("an interrupted run that is %s exited %d: %s", r.Valid, code, out.String())
			}
			if target, err := os.Readlink(filepath.Join(root, "int", "latest")); err != nil || target != filepath.Base(dir) {
				t.Errorf("latest link %q, %v", target, err)
			}
			// Every fault injected before the signal was healed.
			open := map[string]int{}
			for _, o := range h {
				if o.IsNemesis() && o.Type == history.OK && len(o.Value.Targets) > 0 {
					switch o.F {
					case "pause-client", "kill-node":
						open[o.F]++
					case "resume-client":
						open["pause-client"]--
					case "restart-node":
						open["kill-node"]--
					}
				}
			}
			for f, n := range open {
				if n != 0 {
					t.Errorf("%d %s faults left unhealed", n, f)
				}
			}
		})
	}
}

// TestInterruptRemovesTheNetworkLab interrupts runs with network faults:
// after SIGINT the driver removes its namespaces, bridge and rules itself;
// after SIGKILL they are left, and `locktest cleanup` removes them.
func TestInterruptRemovesTheNetworkLab(t *testing.T) {
	gate.Need(t, "redis-server")
	if err := netns.Check(); err != nil {
		t.Skip(err)
	}
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) {
			root := t.TempDir()
			cmd, out := startLocktest(t, "run", "--impl", "redis-set-nx-px", "--faults", "client-isolate,loss",
				"--ttl", "300ms", "--interval", "200ms", "--window", "300ms", "--time", "180s", "--clients", "2",
				"--store", root, "--name", "net")
			// Wait until the run is under way: its results name the lab.
			// Building the lab and starting its servers took over 20 s
			// under stress-ng beside the suite's other packages (at
			// 04e138c); the deadline only guards against a hang, and the
			// run, which is interrupted as soon as its lab is named, is
			// long enough not to end before it.
			var lab string
			deadline := time.Now().Add(120 * time.Second)
			for time.Now().Before(deadline) && lab == "" {
				if dirs, _ := filepath.Glob(filepath.Join(root, "net", "2*")); len(dirs) == 1 {
					if r, err := runstore.ReadResults(dirs[0]); err == nil {
						lab = r.Run.Lab
					}
				}
				time.Sleep(50 * time.Millisecond)
			}
			if lab == "" {
				t.Fatalf("the run never named its lab: %s", out.String())
			}
			time.Sleep(1500 * time.Millisecond)
			f, _ := netns.Find(context.Background())
			if mine := f.Of(lab); len(mine.Namespaces) < 3 || len(mine.Rules) != 1 {
				t.Fatalf("lab %s while running: %+v", lab, mine)
			}
			stopLocktest(t, cmd, out, sig)
			if sig == syscall.SIGKILL {
				// (Another package's test may clean the orphan up first;
				// then cleanup does not list it, and it must be gone.)
				stdout, stderr, code := locktest(t, "cleanup")
				if code != 0 {
					t.Fatalf("cleanup: exit %d, %s%s", code, stdout, stderr)
				}
				if !strings.Contains(stdout, "locktest-"+lab) {
					t.Logf("cleanup did not list lab %s: %s", lab, stdout)
				}
			}
			f, _ = netns.Find(context.Background())
			if left := f.Of(lab); !left.Empty() {
				t.Errorf("after %v the lab is still there: %+v", sig, left)
			}
		})
	}
}

// historyShows is testkit.HistoryShows.
func historyShows(root, name string, parts ...string) bool {
	return testkit.HistoryShows(root, name, parts...)
}

// A run whose fault cannot be applied — partitions on loopback, where no
// host has a network of its own — tested less than it was asked to: it is
// inconclusive, exit 3, never valid (0) nor a violation (1), and says why.
func TestUnappliedFaultExitsThree(t *testing.T) {
	gate.Need(t, "redis-server")
	root := t.TempDir()
	stdout, stderr, code := locktest(t, "run", "--impl", "redis-set-nx-px", "--net", "loopback", "--faults", "isolate",
		"--time", "2s", "--store", root, "--name", "unapplied")
	if code != 3 || !strings.HasPrefix(stderr, "locktest: inconclusive, expected valid: ") || !strings.Contains(stderr, "isolate") {
		t.Fatalf("exit %d, stderr %q; want 3 naming the fault\n%s", code, stderr, stdout)
	}
	dir, r := storedRun(t, root, "unapplied")
	if r.Valid != checker.Unknown {
		t.Errorf("stored verdict %s, want unknown", r.Valid)
	}
	if err := schemacheck.ValidateFile("results", filepath.Join(dir, runstore.ResultsFile)); err != nil {
		t.Error(err)
	}
	// Every run measures how promptly the machine ran it.
	if s := r.Run.Stalls; s == nil || s.Tick != "10ms" || s.Over != "250ms" || s.Longest == "" {
		t.Errorf("stalls %+v: want the stall watch's figures", s)
	}
}
