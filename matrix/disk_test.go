package matrix

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckDisk(t *testing.T) {
	dir := t.TempDir()
	store := filepath.Join(dir, "not", "made", "yet")
	tests := []struct {
		name    string
		jobs    int
		free    uint64
		freeErr error
		wantErr string // "" when the matrix may go on
	}{
		{name: "room for every run", jobs: 1059, free: 1059 * RunBytes},
		{name: "one run short", jobs: 1059, free: 1058 * RunBytes, wantErr: "has 12.4 GB free, and 1059 runs may write up to 12.4 GB (12 MB a run, measured)"},
		{name: "a small matrix on a small disk", jobs: 10, free: 100 << 20, wantErr: "has 100 MB free, and 10 runs may write up to 120 MB"},
		{name: "a disk that cannot be read is no reason to refuse", jobs: 1059, freeErr: errors.New("statfs: no such device")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var asked string
			err := CheckDisk(store, tt.jobs, func(p string) (uint64, error) { asked = p; return tt.free, tt.freeErr })
			if asked != dir {
				t.Errorf("asked the disk of %q, want the nearest folder that exists, %q", asked, dir)
			}
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), store) || strings.Contains(err.Error(), "\n")):
				t.Errorf("error %v, want one line naming the store and %q", err, tt.wantErr)
			}
		})
	}
}

func TestCheckDiskReadsTheRealDisk(t *testing.T) {
	// The real statfs: a temp folder's disk has room for one run on any
	// machine that can run the tests, and none has room for 2^40 runs.
	dir := t.TempDir()
	if err := CheckDisk(dir, 1, nil); err != nil {
		t.Errorf("one run: %v", err)
	}
	if err := CheckDisk(dir, 1<<40, nil); err == nil {
		t.Error("2^40 runs of 12 MB: not refused")
	}
}
