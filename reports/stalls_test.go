package reports

import (
	"testing"

	"github.com/locktest/locktest/runstore"
)

func TestStallsText(t *testing.T) {
	one := &runstore.Stalls{Tick: "10ms", Over: "250ms", Count: 1, Longest: "300ms", LongestAt: "2.1s"}
	many := &runstore.Stalls{Tick: "10ms", Over: "250ms", Count: 4, Longest: "2.7s", LongestAt: "6.8s"}
	for _, c := range []struct {
		name string
		run  runstore.RunInfo
		want string
	}{
		{"not measured", runstore.RunInfo{TTL: "1s"}, ""},
		{"none", runstore.RunInfo{TTL: "1s", Stalls: &runstore.Stalls{Tick: "10ms", Over: "250ms", Longest: "0s"}},
			"none of 250ms or more (a 10ms timer of the driver)"},
		{"short against the ttl", runstore.RunInfo{TTL: "1s", Stalls: one},
			"the driver's 10ms timer woke up to 300ms late, at 2.1s (once 250ms or more)"},
		{"over half the ttl", runstore.RunInfo{TTL: "5s", Stalls: many},
			"the driver's 10ms timer woke up to 2.7s late, at 6.8s (4 times 250ms or more): longer than half the TTL of 5s, " +
				"so a lease may have broken with no fault (the machine paused every process, as a GC pause would)"},
		{"the disk synced promptly", runstore.RunInfo{TTL: "1s", Stalls: &runstore.Stalls{Tick: "10ms", Over: "250ms", Longest: "0s",
			Disk: &runstore.DiskStalls{Every: "100ms", Over: "250ms", Syncs: 40, Longest: "0s"}}},
			"none of 250ms or more (a 10ms timer of the driver); the disk synced within 250ms (40 syncs of a probe file)"},
		{"a slow sync over half the ttl", runstore.RunInfo{TTL: "1s", Stalls: &runstore.Stalls{Tick: "10ms", Over: "250ms", Longest: "0s",
			Disk: &runstore.DiskStalls{Every: "100ms", Over: "250ms", Syncs: 38, Count: 2, Longest: "1.868s", LongestAt: "5.1s"}}},
			"none of 250ms or more (a 10ms timer of the driver); a sync of the disk took up to 1.868s, at 5.1s (2 of 38 syncs of a probe file over 250ms): " +
				"longer than half the TTL of 1s, so a service that syncs before it answers (ZooKeeper, etcd) may have let a lease expire with no fault"},
		{"the hosts answered promptly", runstore.RunInfo{TTL: "5s", Stalls: &runstore.Stalls{Tick: "10ms", Over: "250ms", Longest: "0s",
			Hosts: &runstore.HostStalls{Every: "1s", Longest: "12ms", Host: "h2", LongestAt: "3.2s"}}},
			"none of 250ms or more (a 10ms timer of the driver); the hosts answered keepalives within 12ms (slowest: h2, at 3.2s)"},
		{"a host starved over half the ttl", runstore.RunInfo{TTL: "5s", Stalls: &runstore.Stalls{Tick: "10ms", Over: "250ms", Longest: "0s",
			Hosts: &runstore.HostStalls{Every: "1s", Longest: "15s", Host: "h1", LongestAt: "2.5s"}}},
			"none of 250ms or more (a 10ms timer of the driver); the hosts answered keepalives within 15s (slowest: h1, at 2.5s): " +
				"longer than half the TTL of 5s, so a node on that host may have let a lease expire with no fault"},
		{"no keepalive answered yet", runstore.RunInfo{TTL: "5s", Stalls: &runstore.Stalls{Tick: "10ms", Over: "250ms", Longest: "0s",
			Hosts: &runstore.HostStalls{Every: "1s", Longest: "0s"}}},
			"none of 250ms or more (a 10ms timer of the driver)"},
	} {
		if got := StallsText(c.run); got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
	}
}
