package checker

import (
	"maps"
	"path/filepath"
	"testing"

	"github.com/locktest/locktest/history"
)

// TestFirstConfirmedTimesWhatAWatchKnew: each kind is timed at the op at
// whose reading the streams confirmed it, which is the next op after the
// one that made it certain, or the history's end for what only the end
// settles; not at the earliest op the anomaly names.
func TestFirstConfirmedTimesWhatAWatchKnew(t *testing.T) {
	const ms = 1e6
	tests := []struct {
		file string
		want map[string]int64
	}{
		// p1's grant of token 4 at 201 ms, seen with the next op.
		{"duplicate-token.jsonl", map[string]int64{KindDuplicateToken: 202 * ms}},
		// p1 granted at 200 ms while p0's lease runs to 1.3 s: certain
		// once no op at 200 ms can still end p0's hold, at its release
		// invocation at 250 ms.
		{"overlapping-holders.jsonl", map[string]int64{KindOverlappingHolds: 250 * ms}},
		// p0's release ok is the history's last op.
		{"stale-release.jsonl", map[string]int64{KindStaleRelease: 2130 * ms}},
		// p0's write of 1 stored at 2.105 s, seen with its release
		// invocation at 2.120 s.
		{"stale-write-accepted.jsonl", map[string]int64{KindStaleWrite: 2120 * ms, KindLostUpdate: 2120 * ms}},
		{"clean.jsonl", map[string]int64{}},
	}
	for _, tt := range tests {
		h, err := history.ReadFile(filepath.Join("testdata", tt.file))
		if err != nil {
			t.Fatal(err)
		}
		if got := FirstConfirmed(h, "none"); !maps.Equal(got, tt.want) {
			t.Errorf("%s: %v, want %v", tt.file, got, tt.want)
		}
	}
}
