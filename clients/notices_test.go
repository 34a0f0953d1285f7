package clients

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/workloads"
)

// partitionSeed and partitionInterval pin the one cut of
// TestToldOfAPartition: the first fault of a run comes a uniform draw of
// [0, --interval] after its start (nemesis.Schedule), and with this seed
// that draw is partitionAt.
const (
	partitionSeed     = 11
	partitionInterval = 8 * time.Second
	partitionAt       = 3956 * time.Millisecond
)

// TestToldOfAPartition cuts both clients from every ZooKeeper node (the
// partition n1,n2,n3 / c0,c1) for 5 s, pinned partitionAt after the
// workload's start,
// while one of them holds the lock in a critical section longer than the
// run. The holder's library tells it within its session timeout (2 s)
// that the lease may be gone (SUSPENDED), long before the other client
// can take the lock, which it does only once the cut heals, the holder's
// session having expired meanwhile. With --on-lost ignore the holder
// goes on and overlaps the new holder: told, with a negative notice
// latency (told before the takeover). With --on-lost stop-writing it
// releases at the notice: no overlap, no write after the notice. The
// client is Curator's InterProcessMutex, and its LeaderLatch with
// stop-writing (its notLeader on SUSPENDED is the notice; it is not run
// ignoring it, since a latch whose session expired in the cut leads again
// after the heal, and then nobody need take it over); kazoo's Lock behaves alike (told
// SUSPENDED 0.8 s into the cut, taken over 5.2 s after that, measured
// once with this schedule), and is left out to keep the suite short.
func TestToldOfAPartition(t *testing.T) {
	if _, err := os.Stat("/usr/share/java/zookeeper.jar"); err != nil {
		t.Skip("zookeeper not installed (make setup)")
	}
	// Set here, for the subtests: a parallel test cannot set the
	// environment.
	usesCurator(t)
	for _, tc := range []struct{ client, mode string }{
		{"curator", workloads.OnLostIgnore},
		{"curator", workloads.OnLostStopWriting},
		{"curator-leader-latch", workloads.OnLostStopWriting},
	} {
		client, mode := tc.client, tc.mode
		t.Run(client+"/"+mode, func(t *testing.T) {
			// Each case is an ensemble, clients and a store of its own, on
			// ports of their own, and mostly waits (the cut, the session's
			// expiry, the takeover): two run at a time.
			t.Parallel()
			cfg := config(t, client)
			cfg.Faults, cfg.Seed, cfg.Interval = []string{"partition"}, partitionSeed, partitionInterval
			cfg.FaultSettings = cfg.FaultSettings.With(nemesis.Partition.Is([][]string{{"n1", "n2", "n3"}, {"c0", "c1"}}), nemesis.Window.Is(5*time.Second))
			cfg.Clients, cfg.TTL = 2, 2*time.Second
			cfg.WorkMin, cfg.Work, cfg.Think = time.Minute, time.Minute, 0
			// After the heal the other client reconnects, with a new
			// session, and takes the lock: 4.6 s after it here, with a
			// retry policy that sleeps 100 ms, 200 ms... (8.5 s with
			// Curator's default base of 1 s; kazoo took 1 s). An op
			// deadline of 4 s keeps the adapter's requests, which wait
			// for the connection one after the other, from piling up.
			cfg.Timeout, cfg.Duration, cfg.Quiet = 4*time.Second, 22*time.Second, 12*time.Second
			cfg.ClientParams = map[string]string{"retry-base-sleep": "100ms"}
			cfg.OnLost, cfg.Name = mode, client+"-partition-"+mode
			out, h := mustRun(t, cfg)
			checkToldOfPartition(t, out.Results.Checkers, h, mode)
		})
	}
}

// checkToldOfPartition checks the run of TestToldOfAPartition in mode.
func checkToldOfPartition(t *testing.T, results []checker.Result, h history.History, mode string) {
	t.Helper()
	// The cut begins at the partition's invocation: its rules go in one
	// by one until its ok (1.5 s under stress-ng, where the holder was
	// told between the two), so it may take effect from then on.
	cut, heal := int64(-1), int64(-1)
	for _, o := range h {
		if o.IsNemesis() && strings.HasPrefix(o.F, "partition") && o.Type == history.Invoke && cut < 0 {
			cut = o.Time
		}
		if o.IsNemesis() && cut >= 0 && heal < 0 && o.Type != history.Invoke && strings.HasPrefix(o.F, "heal") {
			heal = o.Time
		}
	}
	if cut < 0 || heal < 0 {
		t.Fatalf("no cut and heal in the history (cut at %d, heal at %d)", cut, heal)
	}
	rows, err := checker.HoldNotices(context.Background(), history.NewTable(h))
	if err != nil {
		t.Fatal(err)
	}
	// The hold open at the cut: the partition is pinned after the first
	// grant, and the critical sections outlast the run.
	var held *checker.HoldNotice
	for i, r := range rows {
		if r.Start < cut && r.Told() {
			held = &rows[i]
		}
	}
	if held == nil {
		t.Fatalf("no hold begun before the cut at %v (pinned %v after the workload's start) was told (rows %+v)", time.Duration(cut), partitionAt, rows)
	}
	if held.NoticeAt < cut || held.NoticeAt > heal || !strings.Contains(held.Reason, "SUSPENDED") {
		t.Errorf("p%d told at %v (%q), want SUSPENDED within the cut [%v, %v]", held.Process, time.Duration(held.NoticeAt), held.Reason, time.Duration(cut), time.Duration(heal))
	}
	kinds := map[string]int{}
	for _, r := range results {
		for _, a := range r.Anomalies {
			kinds[a.Kind]++
		}
	}
	switch mode {
	case workloads.OnLostIgnore:
		if !held.Overlapped() || !held.HasLatency || held.Latency >= 0 {
			t.Errorf("p%d's hold: overlapped %v, latency %v (known %v); want taken over after it was told", held.Process, held.Overlapped(), time.Duration(held.Latency), held.HasLatency)
		}
		if kinds[checker.KindOverlappingHolds] == 0 {
			t.Errorf("anomalies %v: want the holder that ignored its notice to overlap the next one", kinds)
		}
	case workloads.OnLostStopWriting:
		if held.Overlapped() || len(held.WritesAfter) > 0 {
			t.Errorf("p%d's hold: overlapped %v, writes after the notice %v; a holder that stops at the notice overlaps nobody", held.Process, held.Overlapped(), held.WritesAfter)
		}
		for _, k := range checker.SafetyKinds {
			if kinds[k] > 0 {
				t.Errorf("anomalies %v: want no safety violation when the holder stops at its notice", kinds)
				break
			}
		}
	}
	t.Logf("%s: cut %v–%v; p%d told at %v (%s), latency %v; anomalies %v",
		mode, time.Duration(cut).Round(time.Millisecond), time.Duration(heal).Round(time.Millisecond), held.Process,
		time.Duration(held.NoticeAt).Round(time.Millisecond), held.Reason, time.Duration(held.Latency).Round(time.Millisecond), kinds)
}
