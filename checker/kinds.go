package checker

import "slices"

// The kinds of anomaly the checkers report (Anomaly.Kind). Each is a short
// stable name that results.json, the reports, the scenarios' `anomalies:`
// lists and the matrix use; this block is their one definition.
const (
	// KindOverlappingHolds: two processes held one lock at once.
	KindOverlappingHolds = "overlapping-holds"
	// KindForeignRelease: a release removed another holder's lock value.
	KindForeignRelease = "foreign-release"
	// KindStaleRelease: the lock service confirmed the release of a lease
	// after it had granted the lock to another process during it.
	KindStaleRelease = "stale-release"
	// KindStaleWrite: the resource accepted a write from a holder whose
	// hold had ended.
	KindStaleWrite = "stale-write"
	// KindLostUpdate: an accepted write overwrote an update it never read.
	KindLostUpdate = "lost-update"
	// KindTokenRegression: a fencing token went back, between holds or
	// between accepted writes.
	KindTokenRegression = "token-regression"
	// KindDuplicateToken: two holds were granted the same fencing token.
	KindDuplicateToken = "duplicate-token"
	// KindNotLinearizable: the lock's ops are not linearizable as a mutex.
	KindNotLinearizable = "not-linearizable"
	// KindStuckLock: a lock stayed unavailable long after its hold ended
	// (a liveness violation).
	KindStuckLock = "stuck-lock"
)

// The kinds of note (Result.Notes): noteworthy events that do not change
// the verdict.
const (
	// KindNoTokens: no acquire carried a fencing token to check.
	KindNoTokens = "no-tokens"
	// KindWriteRejected: the resource refused a stale write (fencing or
	// check-and-set saved it).
	KindWriteRejected = "write-rejected"
	// KindLiveWriteRejected: the resource refused a write of a holder whose
	// lease had not ended.
	KindLiveWriteRejected = "live-write-rejected"
	// KindLateWrite: the resource accepted a write of a holder whose lease
	// had run out, before any other process was granted the lock: a stale
	// write that trampled nobody.
	KindLateWrite = "late-write"
	// KindWroteAfterNotice: a holder wrote after its client had told it
	// that its lease was lost (a lost notice): its code did not listen.
	// It is the client code's fault, not the lock's.
	KindWroteAfterNotice = "wrote-after-notice"
)

// SafetyKinds are the anomaly kinds that break mutual exclusion or what
// the resource was promised, in the order reports list them: what the
// matrix and the scoreboard count as a violation. Liveness (KindStuckLock)
// and the notes are not among them.
var SafetyKinds = []string{KindOverlappingHolds, KindForeignRelease, KindStaleRelease, KindStaleWrite,
	KindLostUpdate, KindTokenRegression, KindDuplicateToken, KindNotLinearizable}

// AnomalyKinds are every kind of anomaly a checker reports: the safety
// kinds and KindStuckLock.
var AnomalyKinds = append(slices.Clone(SafetyKinds), KindStuckLock)

// NoteKinds are every kind of note a checker reports.
var NoteKinds = []string{KindNoTokens, KindWriteRejected, KindLiveWriteRejected, KindLateWrite, KindWroteAfterNotice}

// IsAnomalyKind reports whether kind is the kind of an anomaly some checker
// reports.
func IsAnomalyKind(kind string) bool { return slices.Contains(AnomalyKinds, kind) }
