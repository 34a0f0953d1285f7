package checker

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/locktest/locktest/history"
)

var updateGolden = flag.Bool("update-golden", false, "rewrite the golden histories in testdata/ from their builders")

// staleReleaseRefused is the end of the stale-write histories: p0, woken
// after p1 was granted the lock, releases its lease, which the lock
// service says it no longer holds.
func staleReleaseRefused(b *builder) {
	b.invoke(0, history.Release, 2120, history.Value{Lock: "x", Token: tok(1), LockValue: lv(0, 1)})
	b.fail(0, history.Release, 2130, history.Value{Lock: "x"}, "not held")
}

// goldenHistories builds the golden histories of testdata/, by file name.
// They are written by `go test -run TestGolden -update-golden`; the test
// reads the files, not these builders, and compares what the checkers find
// with golden.json, which is written by hand.
var goldenHistories = map[string]func(b *builder){
	// Three processes take lock "x" in turn with increasing tokens; failed
	// and unknown attempts and a nemesis pause in between.
	"clean.jsonl": func(b *builder) { b.h = cleanHistory() },
	// p1 is granted the lock while p0 still holds it.
	"overlapping-holders.jsonl": func(b *builder) {
		b.acquire(0, "x", 90, 100, 6, 1300)
		b.acquire(1, "x", 150, 200, 7, 1200)
		b.release(0, "x", 250, 260, 6, lv(0, 6))
		b.release(1, "x", 400, 410, 7, lv(1, 7))
	},
	// p0's lease ends while it is paused; p1 takes the lock and writes; p0
	// wakes and its write is accepted (resource mode none).
	"stale-write-accepted.jsonl": func(b *builder) {
		b.acquire(0, "x", 0, 10, 1, 1010)
		b.read(0, "x", 20, 30, 0)
		b.fault("pause-client", 0, 40, 2000)
		b.section(1, "x", 1100, 2, 0)
		b.write(0, "x", 2100, 2110, 1, 1, 2105)
		staleReleaseRefused(b)
	},
	// The same, but the store is fenced and rejects p0's token.
	"stale-write-rejected.jsonl": func(b *builder) {
		b.acquire(0, "x", 0, 10, 1, 1010)
		b.read(0, "x", 20, 30, 0)
		b.section(1, "x", 1100, 2, 0)
		b.invoke(0, history.Write, 2100, history.Value{Lock: "x", N: history.Num(1), Token: tok(1), LockValue: lv(0, 1)})
		b.fail(0, history.Write, 2110, history.Value{Lock: "x", N: history.Num(1), Token: tok(1), LockValue: lv(0, 1), StoreTime: ms(2105)}, "rejected: token 1 < 2")
		staleReleaseRefused(b)
	},
	// p0's lease ends while it is paused; p1 takes the lock and releases
	// it; p0 wakes and its release succeeds: the lock service confirmed a
	// lease it had handed on.
	"stale-release.jsonl": func(b *builder) {
		b.acquire(0, "x", 0, 10, 1, 1010)
		b.fault("pause-client", 0, 40, 2000)
		b.acquire(1, "x", 1100, 1101, 2, 2100)
		b.release(1, "x", 1106, 1107, 2, lv(1, 2))
		b.release(0, "x", 2120, 2130, 1, "")
	},
	// The fenced store, and p0 wakes from its pause after its lease ran out
	// but before anyone else took the lock: its write of token 1 is
	// accepted, as no newer token exists yet. p1 then takes the lock with
	// token 2, reads what p0 wrote and writes over it. A stale write that
	// trampled nobody: a late-write note, no violation.
	"late-write-fenced.jsonl": func(b *builder) {
		b.acquire(0, "x", 0, 10, 1, 1010)
		b.read(0, "x", 20, 30, 0)
		b.fault("pause-client", 0, 40, 1000)
		b.invoke(1, history.Acquire, 1000, history.Value{Lock: "x"})
		b.fail(1, history.Acquire, 1001, history.Value{Lock: "x"}, "not acquired")
		b.write(0, "x", 1040, 1050, 1, 1, 1045)
		b.release(0, "x", 1060, 1070, 1, "")
		b.section(1, "x", 1100, 2, 1)
	},
	// p1 is granted token 3 after p0's grant of token 5 had completed.
	"token-regression.jsonl": func(b *builder) {
		b.section(0, "x", 100, 5, 0)
		b.section(1, "x", 200, 3, 1)
	},
	// p0 and p1 are granted the same token, one after the other.
	"duplicate-token.jsonl": func(b *builder) {
		b.section(0, "x", 100, 4, 0)
		b.section(1, "x", 200, 4, 1)
	},
	// Session locks (no valid_until): p0 and p1 both believe they hold "x",
	// both read 0 and both write 1: the second write loses the first.
	"lost-update.jsonl": func(b *builder) {
		b.acquire(0, "x", 0, 10, 0, 0)
		b.acquire(1, "x", 5, 20, 0, 0)
		b.read(0, "x", 30, 31, 0)
		b.read(1, "x", 32, 33, 0)
		b.write(0, "x", 40, 41, 1, 0, 41)
		b.write(1, "x", 42, 43, 1, 0, 43)
		b.release(0, "x", 50, 51, 0, "")
		b.release(1, "x", 52, 53, 0, "")
	},
	// A lease with tokens (etcd-mutex's re-entrant session): p1 holds token
	// 851 when the leader is cut off; its release times out (info), and
	// its next acquire is granted token 851 again, with the same lock
	// value, no one else having been granted the lock in between (p2 gave
	// up waiting). The same hold going on, not a duplicate.
	// etcd-io/etcd#22082: p0's release of token 10 is applied but its reply
	// is lost (reply-loss), so it is info; p0 acquires again on the same
	// session, the same key with token 14, and then retries the release
	// of token 10 with its old mutex, which deletes the key by name: p2,
	// waiting, is granted the lock while p0 holds 14. The retry names
	// token 10, so it does not end p0's hold of 14.
	"retried-release-deletes-newer.jsonl": func(b *builder) {
		retriedRelease(b, history.OK, "")
		b.ok(2, history.Acquire, 735, history.Value{Lock: "x", Token: tok(16), LockValue: "p2-key", ValidUntil: ms(3735)})
		b.release(0, "x", 900, 910, 14, "")
		b.h[len(b.h)-2].Value.LockValue = etcdKey
		b.release(2, "x", 1000, 1010, 16, "")
		b.h[len(b.h)-2].Value.LockValue = "p2-key"
	},
	// The same with the release fenced on the key's create revision: the
	// retry finds the key at revision 14, deletes nothing and fails; p2
	// is granted the lock once p0 released 14.
	"retried-release-fenced.jsonl": func(b *builder) {
		retriedRelease(b, history.Fail, "not held: key "+etcdKey+" with revision 10 is gone")
		b.release(0, "x", 900, 910, 14, etcdKey)
		b.h[len(b.h)-2].Value.LockValue = etcdKey
		b.ok(2, history.Acquire, 915, history.Value{Lock: "x", Token: tok(16), LockValue: "p2-key", ValidUntil: ms(3915)})
		b.release(2, "x", 1000, 1010, 16, "p2-key")
		b.h[len(b.h)-2].Value.LockValue = "p2-key"
	},
	"regrant-after-unknown-release.jsonl": func(b *builder) {
		regrantStart(b, 850, 851, "n2|n1,n3,c0,c1,c2")
		b.invoke(2, history.Acquire, 300, history.Value{Lock: "x"})
		b.fail(2, history.Acquire, 1300, history.Value{Lock: "x"}, "not acquired: gave up waiting for an older waiter to go: context deadline exceeded")
		b.add(history.Info, 1, history.Release, 1216, history.Value{Lock: "x", Token: tok(851), LockValue: lv(1, 851)}, "context deadline exceeded")
		b.acquire(1, "x", 1217, 1221, 851, 2221)
		b.read(1, "x", 1222, 1223, 2)
		b.write(1, "x", 1224, 1225, 3, 851, 1225)
		b.release(1, "x", 1226, 1230, 851, lv(1, 851))
		b.invoke(history.NemesisProcess, "heal-network", 2215, history.Value{})
		b.ok(history.NemesisProcess, "heal-network", 2220, history.Value{})
		b.section(2, "x", 2300, 900, 3)
	},
	// The same start, but p1's next acquire, invoked after its release
	// timed out, is granted its old token 396 only after p2 and p3 were
	// granted 406 and 415 (its release was applied late, between the
	// re-grant in the lock service and the acquire's return, which waited
	// long enough to leave the lease only 650 ms): the lease changed hands
	// in between, so 396 is a duplicate. The fenced store refuses p1's
	// write with it, and p1's release finds the lock gone.
	"regrant-after-others.jsonl": func(b *builder) {
		regrantStart(b, 390, 396, "n2|n1,n3,c0,c1,c2,c3")
		b.add(history.Info, 1, history.Release, 1216, history.Value{Lock: "x", Token: tok(396), LockValue: lv(1, 396)}, "context deadline exceeded")
		b.invoke(1, history.Acquire, 1217, history.Value{Lock: "x"})
		b.invoke(history.NemesisProcess, "heal-network", 1300, history.Value{})
		b.ok(history.NemesisProcess, "heal-network", 1310, history.Value{})
		b.section(2, "x", 1400, 406, 2)
		b.section(3, "x", 1500, 415, 3)
		b.ok(1, history.Acquire, 1600, history.Value{Lock: "x", Token: tok(396), LockValue: lv(1, 396), ValidUntil: ms(2250)})
		b.read(1, "x", 1601, 1602, 4)
		w := history.Value{Lock: "x", N: history.Num(5), Token: tok(396), LockValue: lv(1, 396)}
		b.invoke(1, history.Write, 2300, w)
		w.StoreTime = ms(2301)
		b.fail(1, history.Write, 2302, w, "rejected: token 396 < 415")
		b.invoke(1, history.Release, 2303, history.Value{Lock: "x", Token: tok(396), LockValue: lv(1, 396)})
		b.fail(1, history.Release, 2305, history.Value{Lock: "x"}, "not held: key with revision 396 is gone")
	},
	// Session locks: p0's acquire times out (info): it may or may not have
	// taken the lock. p1 then takes and releases the lock, and p0 retries
	// and gets it: consistent with p0's first acquire never taking effect.
	"indeterminate-acquire.jsonl": func(b *builder) {
		b.invoke(0, history.Acquire, 0, history.Value{Lock: "x"})
		b.info(0, history.Acquire, 50, history.Value{Lock: "x"})
		b.section(1, "x", 100, 0, 0)
		b.section(0, "x", 200, 0, 1)
	},
	// Session locks: p1's release removes p0's lock value while p0 holds
	// the lock.
	"release-by-non-holder.jsonl": func(b *builder) {
		b.acquire(0, "x", 0, 10, 0, 0)
		b.invoke(1, history.Release, 20, history.Value{Lock: "x", LockValue: lv(1, 0)})
		b.ok(1, history.Release, 30, history.Value{Lock: "x", Removed: lv(0, 0)})
		b.release(0, "x", 100, 110, 0, lv(0, 0))
	},
	// Session locks: p0's worker is killed inside its critical section;
	// its open write is completed info "worker exited". p1 and p2 then try
	// the lock for 10 s and all fail.
	"stuck-lock.jsonl": func(b *builder) {
		b.acquire(0, "x", 0, 10, 0, 0)
		b.read(0, "x", 20, 30, 0)
		b.invoke(0, history.Write, 40, history.Value{Lock: "x", N: history.Num(1)})
		b.add(history.Info, 0, history.Write, 500, history.Value{Lock: "x", N: history.Num(1)}, "worker exited: signal: killed")
		for k := range 5 {
			p := 1 + k%2
			at := int64(1000 + 2500*k)
			b.invoke(p, history.Acquire, at, history.Value{Lock: "x"})
			b.fail(p, history.Acquire, at+1000, history.Value{Lock: "x"}, "not acquired")
		}
	},
	// Session locks: p0 is paused for 20 s while it holds the lock; p1
	// fails to acquire all that time, then p0 releases and p1 gets it.
	// Contention through a long pause, not a stuck lock.
	"long-pause-not-stuck.jsonl": func(b *builder) {
		b.acquire(0, "x", 0, 10, 0, 0)
		b.invoke(history.NemesisProcess, "pause-client", 20, history.Value{Targets: []string{"p0"}})
		for k := range 8 {
			at := int64(100 + 2500*k)
			b.invoke(1, history.Acquire, at, history.Value{Lock: "x"})
			b.fail(1, history.Acquire, at+1000, history.Value{Lock: "x"}, "not acquired")
		}
		b.ok(history.NemesisProcess, "pause-client", 20020, history.Value{Targets: []string{"p0"}})
		b.release(0, "x", 20030, 20040, 0, lv(0, 0))
		b.section(1, "x", 21000, 0, 0)
	},
	// A lease of 1 s (the CI run at c343ada, under stress-ng, with no
	// fault): p0's release times out, then the server stops answering;
	// p1's attempts time out (info) or cannot even dial (fail "not
	// sent: …") for 9 s. The service was unreachable: no attempt was
	// refused, so nothing shows the lock stuck.
	"unreachable-not-stuck.jsonl": func(b *builder) {
		b.acquire(0, "x", 0, 10, 1, 1000)
		b.invoke(0, history.Release, 20, history.Value{Lock: "x", LockValue: lv(0, 1)})
		b.add(history.Info, 0, history.Release, 1020, history.Value{Lock: "x", LockValue: lv(0, 1)}, "context deadline exceeded")
		for k := range 6 {
			at := int64(2000 + 1500*k)
			b.invoke(1, history.Acquire, at, history.Value{Lock: "x"})
			if k%2 == 0 {
				b.add(history.Info, 1, history.Acquire, at+1000, history.Value{Lock: "x"}, "context deadline exceeded")
			} else {
				b.fail(1, history.Acquire, at+1000, history.Value{Lock: "x"}, history.NotSent+"dial tcp 172.18.0.2:6379: i/o timeout")
			}
		}
	},
	// Lost-lock notices. A session lock (no valid_until), as Curator's:
	// p0 holds x and is paused after its read; p1 takes x, writes and
	// releases; p0 wakes, writes over p1's update and invokes its release,
	// and only then does its client tell it (SUSPENDED) that the lease may
	// be gone: told 2 s after the takeover.
	"notice-after-takeover.jsonl": func(b *builder) {
		b.acquire(0, "x", 0, 10, 0, 0)
		b.read(0, "x", 20, 30, 0)
		b.fault("pause-client", 0, 40, 3000)
		b.section(1, "x", 1100, 0, 0)
		b.write(0, "x", 3010, 3020, 1, 0, 3015)
		b.invoke(0, history.Release, 3030, history.Value{Lock: "x", LockValue: lv(0, 0)})
		b.notice(0, 3100, "x", lv(0, 0), "SUSPENDED: the connection dropped")
		b.add(history.Info, 0, history.Release, 4000, history.Value{Lock: "x", LockValue: lv(0, 0)}, "context deadline exceeded")
	},
	// The same lock, p0 cut off from the service; p1 takes x at 1.101 s,
	// and p0's client tells it only at 1.5 s, while p1 still holds it: a
	// dual-holder window of 399 ms, closed by the notice. p0 releases
	// after p1 did, and is refused.
	"notice-during-takeover.jsonl": func(b *builder) {
		b.acquire(0, "x", 0, 10, 0, 0)
		b.read(0, "x", 20, 30, 0)
		b.fault("isolate-client", 0, 40, 3000)
		b.acquire(1, "x", 1100, 1101, 0, 0)
		b.notice(0, 1500, "x", lv(0, 0), "SUSPENDED: the connection dropped")
		b.release(1, "x", 1900, 1901, 0, lv(1, 0))
		b.invoke(0, history.Release, 2000, history.Value{Lock: "x", LockValue: lv(0, 0)})
		b.add(history.Fail, 0, history.Release, 2001, history.Value{Lock: "x", LockValue: lv(0, 0)}, "not held")
	},
	// The same lock, p0 cut off from the service: its client tells it at
	// 700 ms, and p0, careful (--on-lost stop-writing), writes nothing and
	// releases (the release times out); p1 takes x only after that. A
	// notice of p1's, naming no lease, comes while it holds nothing.
	"notice-stop-writing.jsonl": func(b *builder) {
		b.acquire(0, "x", 0, 10, 0, 0)
		b.read(0, "x", 20, 30, 0)
		b.fault("isolate-client", 0, 40, 3000)
		b.notice(0, 700, "x", lv(0, 0), "SUSPENDED: the connection dropped")
		b.invoke(0, history.Release, 701, history.Value{Lock: "x", LockValue: lv(0, 0)})
		b.add(history.Info, 0, history.Release, 1701, history.Value{Lock: "x", LockValue: lv(0, 0)}, "context deadline exceeded")
		b.section(1, "x", 2100, 0, 0)
		b.notice(1, 3000, "", "", "SUSPENDED: the connection dropped")
	},
	// A lease of 1 s: p0's client tells it at 600 ms that the lease may be
	// gone, a notice that names no lease, and p0 writes at 700 ms all the
	// same (--on-lost ignore). Nobody else takes the lock: the write is no
	// violation, but the client's code did not listen.
	"notice-wrote-after.jsonl": func(b *builder) {
		b.acquire(0, "x", 0, 10, 1, 1010)
		b.read(0, "x", 20, 30, 0)
		b.notice(0, 600, "", "", "Disconnected")
		b.write(0, "x", 700, 710, 1, 1, 705)
		b.release(0, "x", 720, 730, 1, lv(0, 1))
	},
	// Session locks, blocking: p0, p1 and p2 take x in turn, each invoking
	// its next acquire right after its release, so that two acquires are
	// always waiting and no moment comes at which every op has completed.
	"always-waiting.jsonl": func(b *builder) { waitingChain(b, 9, -1) },
	// The same, but the fifth grant (to p2) comes 1 ms before p1, the
	// holder, releases: a violation after the windows were cut.
	"violation-after-cuts.jsonl": func(b *builder) { waitingChain(b, 9, 4) },
	// Session locks, blocking: p0 holds x while p1 and p2 wait; p0's worker
	// is killed (kill-client) and the server frees x, which p1 gets; p0's
	// replacement p3 joins the waiters, and the three take x in turn.
	"killed-holder.jsonl": func(b *builder) {
		x := history.Value{Lock: "x"}
		b.acquire(0, "x", 0, 1, 0, 0)
		b.invoke(1, history.Acquire, 2, x)
		b.invoke(2, history.Acquire, 3, x)
		b.invoke(history.NemesisProcess, "kill-client", 10, history.Value{})
		b.ok(history.NemesisProcess, "kill-client", 12, history.Value{Targets: []string{"p0"}})
		b.ok(1, history.Acquire, 15, x)
		b.invoke(3, history.Acquire, 16, x)
		at := int64(20)
		for _, t := range [][2]int{{1, 2}, {2, 3}, {3, 1}, {1, 2}} {
			h, n := t[0], t[1]
			b.release(h, "x", at, at+1, 0, "")
			b.ok(n, history.Acquire, at+2, x)
			b.invoke(h, history.Acquire, at+3, x)
			at += 10
		}
	},
	// Session locks of one server, blocking: p1 holds x while p0 and p2
	// wait; p1 begins its release, and the server is killed (kill-node):
	// the waiters' acquires and p1's release end of unknown outcome
	// ("invalid connection"), and acquires fail while the server is down.
	// It is restarted, p2 gets x, and the three take x in turn, p1 too,
	// whose release of unknown outcome would otherwise be pending for ever.
	"server-restart.jsonl": func(b *builder) { serverRestart(b, false) },
	// The same, but p1 does not release before the kill: it is still
	// working when the server is back, and p2 is granted x while p1 still
	// believes it holds it. The restart freed p1's lock; it does not excuse
	// the grant.
	"server-restart-holder-working.jsonl": func(b *builder) { serverRestart(b, true) },
}

// serverRestart appends the history of server-restart.jsonl; with working,
// the holder p1 begins its release only after p2 was granted the lock.
func serverRestart(b *builder, working bool) {
	x := history.Value{Lock: "x"}
	b.acquire(1, "x", 0, 1, 0, 0)
	b.invoke(0, history.Acquire, 2, x)
	b.invoke(2, history.Acquire, 3, x)
	if !working {
		b.invoke(1, history.Release, 20, history.Value{Lock: "x", LockValue: lv(1, 0)})
	}
	b.invoke(history.NemesisProcess, "kill-node", 21, history.Value{})
	b.add(history.Info, 0, history.Acquire, 25, x, "invalid connection")
	b.add(history.Info, 2, history.Acquire, 26, x, "invalid connection")
	if !working {
		b.add(history.Info, 1, history.Release, 27, history.Value{Lock: "x", LockValue: lv(1, 0)}, "invalid connection")
	}
	b.ok(history.NemesisProcess, "kill-node", 28, history.Value{Targets: []string{"n1"}, Duration: ms(1000)})
	for k, p := range []int{0, 2} {
		at := int64(30 + 10*k)
		b.invoke(p, history.Acquire, at, x)
		b.fail(p, history.Acquire, at+1, x, "dial tcp: connect: connection refused")
	}
	b.invoke(history.NemesisProcess, "restart-node", 1028, history.Value{})
	b.ok(history.NemesisProcess, "restart-node", 1100, history.Value{Targets: []string{"n1"}})
	b.invoke(2, history.Acquire, 1101, x)
	b.ok(2, history.Acquire, 1102, x)
	b.invoke(0, history.Acquire, 1103, x)
	at := int64(1110)
	if working {
		b.invoke(1, history.Release, 1104, history.Value{Lock: "x", LockValue: lv(1, 0)})
		b.add(history.Info, 1, history.Release, 1105, history.Value{Lock: "x", LockValue: lv(1, 0)}, "invalid connection")
	}
	b.invoke(1, history.Acquire, 1106, x)
	for k := range 6 {
		h, n := []int{2, 0, 1}[k%3], []int{0, 1, 2}[k%3]
		b.release(h, "x", at, at+1, 0, "")
		b.ok(n, history.Acquire, at+2, x)
		b.invoke(h, history.Acquire, at+3, x)
		at += 10
	}
}

// waitingChain appends holds of lock x by processes 0, 1 and 2 in turn,
// holds in all after p0's first: each holder invokes its next acquire
// right after its release, so that two acquires are always waiting. The
// grant numbered overlap (from 0; -1: none) comes 1 ms before the holder's
// release.
func waitingChain(b *builder, holds, overlap int) {
	x := history.Value{Lock: "x"}
	b.acquire(0, "x", 0, 1, 0, 0)
	b.invoke(1, history.Acquire, 2, x)
	b.invoke(2, history.Acquire, 3, x)
	at := int64(10)
	for k := range holds {
		h, n := k%3, (k+1)%3
		if k == overlap {
			b.ok(n, history.Acquire, at, x)
			b.release(h, "x", at+1, at+2, 0, "")
		} else {
			b.release(h, "x", at, at+1, 0, "")
			b.ok(n, history.Acquire, at+2, x)
		}
		b.invoke(h, history.Acquire, at+3, x)
		at += 10
	}
}

// golden is one entry of testdata/golden.json.
type golden struct {
	File   string `json:"file"`
	About  string `json:"about"`
	Mode   string `json:"mode"`
	Leases bool   `json:"leases"`
	// ServerSessions says the locks are sessions of one server
	// (RunFacts.ServerSessions).
	ServerSessions bool `json:"server_sessions,omitempty"`
	// Error is, for a history that must be refused, part of the error.
	Error string `json:"error,omitempty"`
	// Valid is the overall verdict.
	Valid Verdict `json:"valid,omitempty"`
	// Anomalies and Notes are, per checker, the kinds and ops expected;
	// a checker not named must find none.
	Anomalies map[string][]goldenAnomaly `json:"anomalies,omitempty"`
	Notes     map[string][]goldenAnomaly `json:"notes,omitempty"`
}

type goldenAnomaly struct {
	Kind string `json:"kind"`
	Ops  []int  `json:"ops"`
}

// readGolden reads testdata/golden.json.
func readGolden(t *testing.T) []golden {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var gs []golden
	if err := json.Unmarshal(data, &gs); err != nil {
		t.Fatalf("golden.json: %v", err)
	}
	return gs
}

func writeGolden(t *testing.T, path string, h history.History) {
	t.Helper()
	w, err := history.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	rec := history.NewRecorder(w)
	for _, op := range h {
		if _, err := rec.Record(op); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// regrantStart appends the start the regrant golden histories share:
// p0's clean section with token first, then p1 granted token tk, reading
// 1 and writing 2, and invoking its release while the nemesis cuts the
// leader off (the partition's targets), the release's completion still to
// come.
// etcdKey is the key of p0's etcd session in the retried-release
// histories: the lock value of each of its grants.
const etcdKey = "/locktest/mutex/x/694d"

// retriedRelease starts the retried-release histories: p0 holds token 10
// (key etcdKey); under reply-loss its release is applied and times out;
// p2 starts waiting; p0 acquires the same key again with token 14, and
// retries the release of token 10, which completes as retry (with
// errText).
func retriedRelease(b *builder, retry history.Type, errText string) {
	held := func(t uint64) history.Value { return history.Value{Lock: "x", Token: tok(t), LockValue: etcdKey} }
	b.invoke(0, history.Acquire, 100, history.Value{Lock: "x"})
	b.ok(0, history.Acquire, 101, history.Value{Lock: "x", Token: tok(10), LockValue: etcdKey, ValidUntil: ms(3101)})
	b.invoke(history.NemesisProcess, "partition-reply-loss", 150, history.Value{})
	b.ok(history.NemesisProcess, "partition-reply-loss", 160, history.Value{Targets: []string{"n1,n2,n3>c0"}})
	b.invoke(0, history.Release, 200, held(10))
	b.invoke(2, history.Acquire, 400, history.Value{Lock: "x"})
	b.add(history.Info, 0, history.Release, 600, held(10), "context deadline exceeded")
	b.invoke(history.NemesisProcess, "heal-network", 650, history.Value{})
	b.ok(history.NemesisProcess, "heal-network", 660, history.Value{})
	b.invoke(0, history.Acquire, 700, history.Value{Lock: "x"})
	b.ok(0, history.Acquire, 710, history.Value{Lock: "x", Token: tok(14), LockValue: etcdKey, ValidUntil: ms(3710)})
	b.invoke(0, history.Release, 720, held(10))
	done := held(10)
	if retry == history.OK {
		done = history.Value{Lock: "x", Removed: etcdKey}
	}
	b.add(retry, 0, history.Release, 730, done, errText)
}

func regrantStart(b *builder, first, tk uint64, targets string) {
	b.section(0, "x", 100, first, 0)
	b.acquire(1, "x", 200, 210, tk, 1210)
	b.read(1, "x", 211, 212, 1)
	b.write(1, "x", 213, 214, 2, tk, 214)
	b.invoke(history.NemesisProcess, "partition-isolate", 215, history.Value{})
	b.invoke(1, history.Release, 216, history.Value{Lock: "x", Token: tok(tk), LockValue: lv(1, int(tk))})
	b.ok(history.NemesisProcess, "partition-isolate", 220, history.Value{Targets: []string{targets}})
}

func TestGolden(t *testing.T) {
	if *updateGolden {
		for name, build := range goldenHistories {
			var b builder
			build(&b)
			writeGolden(t, filepath.Join("testdata", name), b.h)
		}
		// The truncated history is the clean one cut inside its last line.
		var b builder
		b.h = cleanHistory()
		path := filepath.Join("testdata", "truncated.jsonl")
		writeGolden(t, path, b.h)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data[:len(data)-25], 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gs := readGolden(t)
	files, _ := filepath.Glob(filepath.Join("testdata", "*.jsonl"))
	if len(files) != len(gs) {
		t.Errorf("%d histories in testdata, %d entries in golden.json", len(files), len(gs))
	}
	for _, g := range gs {
		t.Run(strings.TrimSuffix(g.File, ".jsonl"), func(t *testing.T) {
			h, err := history.ReadFile(filepath.Join("testdata", g.File))
			if g.Error != "" {
				if err == nil || !strings.Contains(err.Error(), g.Error) {
					t.Fatalf("err %v, want one containing %q", err, g.Error)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			rs := Run(context.Background(), history.NewTable(h), goldenCheckers(g)...)
			if got := Overall(rs); got != g.Valid {
				t.Errorf("overall verdict %s, want %s", got, g.Valid)
			}
			for _, r := range rs {
				wantValid := Valid
				if len(g.Anomalies[r.Checker]) > 0 {
					wantValid = Invalid
				}
				if r.Valid != wantValid {
					t.Errorf("%s: %s, want %s (%s)", r.Checker, r.Valid, wantValid, r.Error)
				}
				compareGolden(t, r.Checker+" anomalies", r.Anomalies, g.Anomalies[r.Checker])
				compareGolden(t, r.Checker+" notes", r.Notes, g.Notes[r.Checker])
			}
		})
	}
}

// goldenCheckers are the checkers of golden entry g: For its mode and
// leases, the mutex model told whether the locks are sessions of one
// server, as Decide tells it.
func goldenCheckers(g golden) []Checker {
	cs := For(g.Mode, g.Leases)
	for i, c := range cs {
		if l, ok := c.(Linearizability); ok && l.Model == MutexModel {
			l.ServerSessions = g.ServerSessions
			cs[i] = l
		}
	}
	return cs
}

func compareGolden(t *testing.T, what string, got []Anomaly, want []goldenAnomaly) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: got %d, want %d: %+v", what, len(got), len(want), got)
		return
	}
	for i := range want {
		if got[i].Kind != want[i].Kind || !slices.Equal(got[i].Ops, want[i].Ops) || got[i].Explanation == "" {
			t.Errorf("%s[%d]: got %s %v, want %s %v (%s)", what, i, got[i].Kind, got[i].Ops, want[i].Kind, want[i].Ops, got[i].Explanation)
		}
	}
}
