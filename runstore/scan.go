package runstore

import (
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"
)

// Stored is one run found in a store.
type Stored struct {
	// Dir is the run's folder relative to the store, with slashes.
	Dir     string
	Started time.Time
	Results Results
	// Report says whether the run's folder has a report.html.
	Report bool
	// Anomalies counts the anomalies of every checker.
	Anomalies int
	// Err says why the run's results.json could not be read.
	Err string
}

// Scan returns every run stored under root (each folder with a
// results.json), newest first. Symbolic links (a scenario's "latest") are
// not followed, so each run is listed once. A results.json that cannot be
// read gives a row with its error, not an error of the scan.
func Scan(root string) ([]Stored, error) {
	if _, err := os.Stat(root); err != nil {
		return nil, err
	}
	var rows []Stored
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return nil // an unreadable folder is left out
		}
		if e.IsDir() || e.Name() != ResultsFile {
			return nil
		}
		dir := filepath.Dir(p)
		rel, rerr := filepath.Rel(root, dir)
		if rerr != nil {
			return nil
		}
		row := Stored{Dir: filepath.ToSlash(rel)}
		res, rerr := ReadResults(dir)
		if rerr != nil {
			row.Err = rerr.Error()
		}
		row.Results = res
		row.Started, _ = time.Parse(time.RFC3339, res.Run.Started)
		if st, err := os.Stat(filepath.Join(dir, ReportFile)); err == nil && !st.IsDir() {
			row.Report = true
		}
		for _, c := range res.Checkers {
			row.Anomalies += len(c.Anomalies)
		}
		rows = append(rows, row)
		return nil
	})
	sort.SliceStable(rows, func(i, j int) bool {
		if !rows[i].Started.Equal(rows[j].Started) {
			return rows[i].Started.After(rows[j].Started)
		}
		return rows[i].Dir > rows[j].Dir
	})
	return rows, err
}
