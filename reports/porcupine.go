package reports

import (
	"bytes"
	"context"
	"path/filepath"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/runstore"
)

// LinearizabilityFile is porcupine's visualization of what the porcupine
// mutex checker found, written next to report.html when that checker ran.
const LinearizabilityFile = "linearizability.html"

// MaxVisualizedOps is the largest number of mutex ops porcupine's
// visualization is made for: its page grows with the history (20,000 ops
// make about 4.5 MB, which Chromium opens in about 3.5 s), and a larger one
// no longer opens in reasonable time. A longer history's page shows the
// checker's first windows (checker.Linearizability.CheckVisual).
const MaxVisualizedOps = 20_000

// mutexChecker is the name of the porcupine mutex checker's results.
var mutexChecker = checker.Linearizable(checker.MutexModel, 0).Name()

// visualizeMutex writes into dir porcupine's visualization vis of the
// mutex checker's search and returns the file's name, or "" when vis shows
// nothing, and a note: what part of the ops the page shows when it is not
// all, or why there is no page. A nil vis is made by running the checker
// on h once more (the re-rendering of a stored run, which kept no search).
func visualizeMutex(dir string, h *history.Table, vis *checker.Visualization) (file, note string, err error) {
	if vis == nil {
		c := checker.Linearizable(checker.MutexModel, checker.DefaultLinearizableTimeout).(checker.Linearizability)
		_, vis = c.CheckVisual(context.Background(), h, MaxVisualizedOps)
		if vis == nil {
			return "", "the checker could not run", nil
		}
	}
	if vis.Ops == 0 {
		return "", vis.Note, nil
	}
	var buf bytes.Buffer
	if err := vis.WriteHTML(&buf); err != nil {
		return "", "", err
	}
	if err := runstore.WriteFileAtomic(filepath.Join(dir, LinearizabilityFile), buf.Bytes()); err != nil {
		return "", "", err
	}
	return LinearizabilityFile, vis.Note, nil
}
