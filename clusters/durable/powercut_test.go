package durable

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/locktest/locktest/clusters"
)

// TestCutFilesAndCutOnWrite: a power cut of a node whose files are here
// cuts what its plan says, reports and logs the cuts, and names the node
// in its errors; a cut on a write that never comes in time cuts at the
// limit, and a wait that fails cuts nothing and says so with
// clusters.ErrUntouched.
func TestCutFilesAndCutOnWrite(t *testing.T) {
	dir := t.TempDir()
	set := aofOf([]string{"SET", "lock", "b"})
	aof := filepath.Join(dir, "a.aof")
	if err := os.WriteFile(aof, set, 0o644); err != nil {
		t.Fatal(err)
	}
	plan := func() ([]Cut, error) { return []Cut{{Path: "a.aof", Size: len64(set), Durable: 4}}, nil }
	var log bytes.Buffer
	lg := slog.New(slog.NewTextHandler(&log, nil))
	for _, tc := range []struct {
		name    string
		plan    func() ([]Cut, error)
		wantErr string
		want    []clusters.FileCut
		size    int64
	}{
		{"cut", plan, "", []clusters.FileCut{{Path: "a.aof", Size: len64(set), Durable: 4}}, 4},
		{"record unreadable", func() ([]Cut, error) { return nil, errors.New("bad line") }, "redis: cut the files of n1: bad line", []clusters.FileCut{}, 4},
		{"file gone", func() ([]Cut, error) { return []Cut{{Path: "gone", Size: 3}}, nil }, "redis: cut the files of n1: truncate", []clusters.FileCut{{Path: "gone", Size: 3}}, 4},
	} {
		log.Reset()
		got, err := CutFiles(lg, "redis", "n1", dir, tc.plan, "node", "n1")
		if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.wantErr)
		}
		if len(got) != len(tc.want) || len(got) > 0 && got[0] != tc.want[0] {
			t.Errorf("%s: cuts %v, want %v", tc.name, got, tc.want)
		}
		if st, err := os.Stat(aof); err != nil || st.Size() != tc.size {
			t.Errorf("%s: a.aof after the cut: %v, %v; want %d bytes", tc.name, st, err, tc.size)
		}
		if !strings.Contains(log.String(), "node power cut") || !strings.Contains(log.String(), "node=n1") {
			t.Errorf("%s: log %q", tc.name, log.String())
		}
	}

	cut := func() ([]clusters.FileCut, error) { return []clusters.FileCut{{Path: "cut"}}, nil }
	got, err := CutOnWrite(context.Background(), "docker redis", "n2", dir, plan, 20*time.Millisecond, cut)
	if err != nil || len(got) != 1 {
		t.Errorf("no unsynced SET within the limit: %v, %v; want the cut at the limit", got, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	got, err = CutOnWrite(ctx, "docker redis", "n2", dir, plan, time.Minute, cut)
	if !errors.Is(err, clusters.ErrUntouched) || !errors.Is(err, context.Canceled) || got != nil ||
		!strings.Contains(err.Error(), "docker redis: wait for an unsynced write of n2") {
		t.Errorf("a cancelled wait: %v, %v; want no cut and an error of n2 wrapping ErrUntouched", got, err)
	}
}
