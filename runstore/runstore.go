// Package runstore is the layout of the store of runs on disk: where a run's
// folder goes (STORE/<name>/<stamp>/, with a `latest` link beside it),
// the names of the files in it, and the reading and writing of its
// results.json. It decides nothing (package checker does) and renders
// nothing (package reports does).
package runstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// The file and folder names of a stored run's folder.
const (
	// HistoryFile is the run's history, one op per line (docs/history.md).
	HistoryFile = "history.jsonl"
	// ResultsFile is the run's results: how it was made and the verdict.
	ResultsFile = "results.json"
	// ReportFile is the run's HTML report.
	ReportFile = "report.html"
	// ResourceFile is the resource store's log of reads and writes.
	ResourceFile = "resource.jsonl"
	// ScheduleFile is the run's fault schedule as data (nemesis.Plan,
	// docs/schemas/schedule.schema.json): what `locktest run --schedule`
	// replays.
	ScheduleFile = "schedule.json"
	// LogsDir holds the driver's, the workers' and the nodes' logs.
	LogsDir = "logs"
	// Latest is the link, beside a run name's folders, to its newest run.
	Latest = "latest"
)

// MakeRunDir creates root/name/<timestamp> for a run started at t, adding
// a suffix when two runs start in the same second, and returns its
// absolute path.
func MakeRunDir(root, name string, t time.Time) (string, error) {
	base := filepath.Join(root, name, t.Format("20060102T150405"))
	for i := 0; i < 100; i++ {
		d := base
		if i > 0 {
			d = fmt.Sprintf("%s-%d", base, i)
		}
		if err := os.MkdirAll(filepath.Dir(d), 0o755); err != nil {
			return "", err
		}
		err := os.Mkdir(d, 0o755)
		if err == nil {
			return filepath.Abs(d)
		}
		if !errors.Is(err, os.ErrExist) {
			return "", err
		}
	}
	return "", fmt.Errorf("too many runs named %s at %s", name, t.Format(time.RFC3339))
}

// LinkLatest points the Latest link in dir's parent at dir, replacing the
// link atomically. Runs of one name that end at once (a debate's seeds
// made in parallel) each use a temporary link of their own, and the last
// rename wins.
func LinkLatest(dir string) error {
	link := filepath.Join(filepath.Dir(dir), Latest)
	tmp := link + "." + filepath.Base(dir) + ".tmp"
	_ = os.Remove(tmp)
	if err := os.Symlink(filepath.Base(dir), tmp); err != nil {
		return err
	}
	return os.Rename(tmp, link)
}

// WriteFileAtomic writes b to path via a temporary file and a rename, so
// a reader never sees half a file; on error no temporary file is left.
func WriteFileAtomic(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		_ = os.Remove(tmp) // a part of it, on a full disk
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return errors.Join(err, os.Remove(tmp))
	}
	return nil
}
