package ssh_test

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/locktest/locktest/clusters/clientaddr"
	"github.com/locktest/locktest/clusters/sshlab"
	"github.com/locktest/locktest/runstore"
	"github.com/locktest/locktest/testkit"
	"github.com/locktest/locktest/testkit/dockertest"
	"github.com/locktest/locktest/testkit/gate"
	"github.com/locktest/locktest/testkit/testlab"
)

// TestSSHLabInterruptAndCleanup brings a lab up with `locktest lab up`,
// interrupts a Redlock run over it (Ctrl-C) once it has acquired under a
// partition, and checks that the node logs were collected and that no host
// keeps a file, rule or process of the run; then kills a second run
// outright and checks that `locktest cleanup --provider ssh` removes what
// it left; `locktest lab down` removes the lab.
func TestSSHLabInterruptAndCleanup(t *testing.T) {
	gate.Need(t, "sshd", "redis-server", "iptables")
	e := dockertest.Open(t)
	defer e.Close()
	dir, root := t.TempDir(), t.TempDir()
	if _, stderr, code := locktestCLI(t).Run(t, nil, "lab", "up", "--dir", dir); code != 0 {
		t.Fatalf("lab up: exit %d: %s", code, stderr)
	}
	t.Cleanup(func() {
		if stdout, stderr, code := locktestCLI(t).Run(t, nil, "lab", "down", "--dir", dir); code != 0 || !strings.Contains(stdout, "removed lab") {
			t.Errorf("lab down: exit %d: %s%s", code, stdout, stderr)
		}
		if _, err := os.Stat(filepath.Join(dir, sshlab.Inventory)); err == nil {
			t.Errorf("lab down left %s", sshlab.Inventory)
		}
	})
	inventory := filepath.Join(dir, sshlab.Inventory)
	t.Run("debate", func(t *testing.T) { sshDebate(t, inventory, root) })
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) {
			name := strings.ToLower(sig.String()[:3])
			cmd, out := locktestCLI(t).Start(t, "run", "--provider", "ssh", "--inventory", inventory, "--impl", "redlock",
				"--faults", "isolate", "--interval", "500ms", "--time", "60s", "--store", root, "--name", name)
			deadline := time.Now().Add(60 * time.Second)
			for time.Now().Before(deadline) && !testkit.HistoryShows(root, name, `"type":"ok","process":-1,"f":"partition-isolate"`) {
				time.Sleep(50 * time.Millisecond)
			}
			if !testkit.HistoryShows(root, name, `"type":"ok","process":-1,"f":"partition-isolate"`) {
				cmd.Process.Kill()
				t.Fatalf("no partition within a minute: %s", out.String())
			}
			testkit.Stop(t, cmd, out, sig)
			if sig == syscall.SIGKILL {
				stdout, stderr, code := locktestCLI(t).Run(t, nil, "cleanup", "--provider", "ssh", "--inventory", inventory)
				if code != 0 || !strings.Contains(stdout, "ssh: removed run") {
					t.Fatalf("cleanup: exit %d: %s%s", code, stdout, stderr)
				}
				// The killed run's clients had addresses of their own
				// on this host (its isolate may cut a client off), and
				// cleanup removes them. Another package's test may run
				// `locktest cleanup` between the kill and this one; then
				// this one does not list them, and they must be gone.
				m := regexp.MustCompile(`ssh: removed run (\w+) `).FindStringSubmatch(stdout)
				if m == nil {
					t.Fatalf("cleanup named no run: %s", stdout)
				}
				if !strings.Contains(stdout, "removed the client addresses of run ssh-"+m[1]) {
					t.Logf("cleanup did not list the client addresses of run ssh-%s (another test's cleanup may have been first): %s", m[1], stdout)
				}
				left, err := clientaddr.Cleanup(context.Background(), true)
				if err != nil {
					t.Fatal(err)
				}
				for _, l := range left {
					if l.RunID == "ssh-"+m[1] {
						t.Errorf("after cleanup the client addresses of the killed run are still here: %+v", l)
					}
				}
			} else {
				logs, _ := filepath.Glob(filepath.Join(root, name, "2*", "logs", "n5.log"))
				if len(logs) != 1 {
					t.Errorf("the interrupted run collected no log of n5: %s", out.String())
				}
			}
			testlab.AssertClean(t, inventory)
		})
	}
}

// sshClaims are the catalogue's scenarios that sshDebate runs over the
// lab, one per claim the ssh provider must reproduce as the local one does:
// claim 1 (a GC pause on one Redis), claim 2 (a clock jump on a Redlock node
// while a partition splits the clients between the nodes: each client
// reaches the nodes from an address of its own) and claim 7 (an etcd lease
// outlived by a paused holder). Claim 6 runs from testdata (sshSlowHosts).
var sshClaims = []string{"redis-gc-pause", "redlock-clock-jump", "etcd-pause"}

// sshSlowHosts are claim 6's scenarios with holds long enough for SSH
// commands to starved hosts, each in its file under testdata, which says
// why: the restart without persistence (the catalogue's 1.2 s holds were
// over before the node came back in loaded CI, 0 of 6 seeds) and the power
// loss under appendfsync everysec, whose node program records what each
// node syncs (the catalogue's reproduced 0 of 5 under stress-ng). Each
// pins its fault to a grant, so that the seed's schedule does not decide
// whether it meets a holder: the kill waits for a client's acquire
// (kill-on-grant), the power cut for a grant's unsynced write (power-loss).
var sshSlowHosts = map[string]string{
	"redlock-restart-without-persistence-slow-hosts": "ssh-restart-without-persistence.yaml",
	"redlock-power-loss-everysec-slow-hosts":         "ssh-power-loss-everysec.yaml",
}

// sshDebate runs sshClaims, and each of sshSlowHosts from its file,
// through `locktest debate --provider ssh` over the lab: each reproduces,
// as it does locally (up to six seeds each, as the scheduler decides
// whether the next holder writes before the woken one), each run's
// reproducing command names the provider and the inventory, the
// partitions had the clients on their own addresses, the power loss
// recorded what each node syncs, and no host keeps anything of it (nor
// this host an address of it).
func sshDebate(t *testing.T, inventory, root string) {
	testkit.KeepFailedStore(t, root)
	out := t.TempDir()
	stdout, stderr, code := locktestCLI(t).Run(t, nil, "debate", "--provider", "ssh", "--inventory", inventory, "--only", strings.Join(sshClaims, ","),
		"--seeds", "6", "--until-reproduced", "--store", root, "--out", out, "-q")
	if code != 0 {
		t.Fatalf("debate: exit %d, want 0 (reproduced): %s%s", code, stdout, stderr)
	}
	stores := map[string]string{}
	for _, sc := range slices.Sorted(maps.Keys(sshSlowHosts)) {
		slow, store := sshSlowDebate(t, inventory, root, sc)
		stdout += slow
		stores[sc] = store
	}
	for _, sc := range append(slices.Clone(sshClaims), slices.Sorted(maps.Keys(sshSlowHosts))...) {
		if !regexp.MustCompile(`(?m)^\d+ +` + sc + ` .*reproduced$`).MatchString(stdout) {
			t.Errorf("%s not reproduced over ssh:\n%s", sc, stdout)
		}
	}
	for sc, want := range map[string]string{
		"redlock-clock-jump":                             "clients from c0 ",
		"redlock-restart-without-persistence-slow-hosts": "clients from c0 ",
		"redlock-power-loss-everysec-slow-hosts":         "records what each node syncs",
	} {
		store := root
		if s, ok := stores[sc]; ok {
			store = s
		}
		results, _ := filepath.Glob(filepath.Join(store, sc, "2*", "results.json"))
		if len(results) == 0 {
			t.Fatalf("no stored run of %s", sc)
		}
		b, err := os.ReadFile(results[0])
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), want) {
			t.Errorf("%s's results do not say %q", sc, want)
		}
		if sc == "redlock-clock-jump" && !strings.Contains(string(b), "clock shim") {
			t.Errorf("%s's results do not say the clock shim moved the clock", sc)
		}
	}
	board, err := os.ReadFile(filepath.Join(out, "scoreboard.md"))
	if err != nil || !strings.Contains(string(board), "etcd-pause") {
		t.Fatalf("scoreboard.md (%v) does not hold etcd-pause: %s", err, board)
	}
	results, _ := filepath.Glob(filepath.Join(root, "etcd-pause", "2*", "results.json"))
	if len(results) == 0 {
		t.Fatalf("no stored run of etcd-pause under %s", root)
	}
	b, err := os.ReadFile(results[0])
	if err != nil {
		t.Fatal(err)
	}
	if want := "--provider ssh --inventory " + inventory; !strings.Contains(string(b), want) {
		t.Errorf("the run's results do not hold %q in its command", want)
	}
	if !strings.Contains(string(b), `"provider": "ssh"`) {
		t.Errorf("the run's results do not say provider ssh")
	}
	testlab.AssertClean(t, inventory)
}

// sshSlowDebate runs scenario sc of sshSlowHosts over the lab, up to six
// seeds until it reproduces, in a store of its own under root, and returns
// the debate's output and that store. Claim 6 needs the holder still
// working when the restarted node grants the lock again. Under stress-ng
// (at 94e275f) it reproduced in 0 of 5 seeds while the lab's hosts went
// 15 s without answering: a debate that does not reproduce it while a
// host or the machine stalled for a second or more is run again, once, in
// a store of its own.
func sshSlowDebate(t *testing.T, inventory, root, sc string) (string, string) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		store := filepath.Join(root, sc+"-"+strconv.Itoa(attempt))
		out, stderr, code := locktestCLI(t).Run(t, nil, "debate", "--provider", "ssh", "--inventory", inventory, "--scenarios", filepath.Join("testdata", sshSlowHosts[sc]),
			"--seeds", "6", "--until-reproduced", "--store", store, "--out", t.TempDir(), "-q")
		stalled := storedStall(t, filepath.Join(store, sc))
		if code == 0 || attempt == 2 || stalled < time.Second {
			if code != 0 {
				t.Fatalf("debate of %s: exit %d, want 0 (reproduced), with stalls of up to %v: %s%s", sc, code, stalled, out, stderr)
			}
			// Its seeds run (the fault is pinned to a grant: one, unless
			// the restarted node came back after the holder's work).
			t.Logf("debate of %s:\n%s", sc, out)
			return out, store
		}
		t.Logf("debate of %s: exit %d while a host or the machine stalled for up to %v; running it again: %s", sc, code, stalled, out)
	}
}

// storedStall is the longest stall (testkit.Stalled: the driver's timer,
// the disk or a host's keepalive) of the runs stored in dir.
func storedStall(t *testing.T, dir string) time.Duration {
	t.Helper()
	var most time.Duration
	runs, _ := filepath.Glob(filepath.Join(dir, "2*"))
	for _, r := range runs {
		res, err := runstore.ReadResults(r)
		if err != nil {
			t.Errorf("%s: %v", r, err)
			continue
		}
		most = max(most, testkit.Stalled(res))
	}
	return most
}

var (
	cliOnce   sync.Once
	cli       testkit.CLI
	removeCLI = func() {}
	cliErr    error
)

// locktestCLI returns the locktest command, built at its first use by
// this package's tests and removed when they end (TestMain).
func locktestCLI(t *testing.T) testkit.CLI {
	t.Helper()
	cliOnce.Do(func() { cli, removeCLI, cliErr = testkit.BuildCLI() })
	if cliErr != nil {
		t.Fatal(cliErr)
	}
	return cli
}
