package run

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/reports"
	"github.com/locktest/locktest/runstore"
)

// NotStreamable is Recheck's refusal of a stream it was asked for: the
// history at Path cannot be checked as a stream, for Why
// (checker.FileFacts.Streamable).
type NotStreamable struct {
	Path string
	Why  error
}

func (e NotStreamable) Error() string {
	return fmt.Sprintf("%s cannot be checked as a stream: %v", e.Path, e.Why)
}

// Recheck checks again the stored run that arg names (its folder, or its
// history file), runs every checker on its history, rewrites its
// results.json and report, and returns the folder and the results. It
// writes to w how long reading took and, once the results are stored,
// how long checking and drawing took.
//
// A history large enough (StreamFile), or any history when stream is set,
// is checked as a stream (DecideStream), its report drawing its first
// ReportOps ops; with stream set, a history that cannot be streamed is a
// NotStreamable error. Any other history is held whole (FitMemory refuses
// one this machine cannot hold). A history whose last line was cut short
// is checked without it, and the cut is among the run's errors; a run
// whose results.json says it did not finish names
// runstore.UnfinishedChecked among them (loadRun). Any other bad history
// is an error, and nothing is rewritten. An error after the results were
// stored (the report could not be drawn) comes with them.
func Recheck(ctx context.Context, arg string, stream bool, w io.Writer) (string, runstore.Results, error) {
	start := time.Now()
	dir, path := runPaths(arg)
	streamed, ff, err := StreamFile(ctx, path, stream)
	switch {
	case stream && err == nil && !streamed:
		return dir, runstore.Results{}, NotStreamable{path, ff.Streamable()}
	case streamed && err == nil:
		info, err := loadInfo(dir)
		if err != nil {
			return dir, runstore.Results{}, err
		}
		fmt.Fprintf(w, "read the facts of %d ops in %s; checking them as a stream\n", ff.Ops, time.Since(start).Round(time.Millisecond))
		checked := time.Now()
		d, h, err := DecideStream(ctx, path, FactsOf(info), ff, nil)
		if err != nil {
			return dir, runstore.Results{}, err
		}
		return storeCheck(w, dir, info, d, h, checked, "the checkers on one stream", fmt.Sprintf("report of the first %d ops", h.Len()))
	}
	dir, h, info, err := loadRun(arg)
	var cut *history.LineError
	switch {
	case errors.As(err, &cut) && errors.Is(err, history.ErrTruncated):
		// (A second check finds the problem in results.json already.)
		if p := fmt.Sprintf("history: line %d was cut short (%v); the %d ops before it were checked",
			cut.Line, history.ErrTruncated, h.Len()); !slices.Contains(info.Errors, p) {
			info.Errors = append(info.Errors, p)
		}
	case err != nil:
		return dir, runstore.Results{}, err
	}
	fmt.Fprintf(w, "read %d ops in %s\n", h.Len(), time.Since(start).Round(time.Millisecond))
	checked := time.Now()
	d := checker.Decide(ctx, h, FactsOf(info), reports.MaxVisualizedOps)
	return storeCheck(w, dir, info, d, h, checked, "the checkers side by side", "report")
}

// storeCheck writes the results of the check of the run in dir, made as
// info and decided as d (from checked on, how), and its report, drawn
// from h (what), and says so on w.
func storeCheck(w io.Writer, dir string, info runstore.RunInfo, d checker.Decision, h *history.Table, checked time.Time, how, what string) (string, runstore.Results, error) {
	res := runstore.New(info, d)
	if err := runstore.WriteResults(dir, res); err != nil {
		return dir, res, err
	}
	rendered := time.Now()
	if err := reports.WriteHTMLVisual(dir, res, h, d.Visual); err != nil {
		return dir, res, err
	}
	fmt.Fprintf(w, "checked in %s (%s), %s written in %s\n",
		rendered.Sub(checked).Round(time.Millisecond), how, what, time.Since(rendered).Round(time.Millisecond))
	return dir, res, nil
}

// Redraw draws again the report of the stored run that arg names (its
// folder, or its history file) from its history and results.json, and
// returns the report's path. A history of StreamFrom bytes or more is
// drawn from its first ReportOps ops, as its check drew it when it
// streamed it.
func Redraw(ctx context.Context, arg string) (string, error) {
	var h *history.Table
	dir, path := runPaths(arg)
	var err error
	if st, serr := os.Stat(path); serr == nil && st.Size() >= StreamFrom {
		h, err = history.ReadTableHead(ctx, path, ReportOps)
	} else {
		dir, h, _, err = loadRun(arg)
	}
	if err != nil && !errors.Is(err, history.ErrTruncated) {
		return "", err
	}
	res, err := runstore.ReadResults(dir)
	if err != nil {
		return "", fmt.Errorf("%v (run `locktest check %s` first)", err, dir)
	}
	if err := reports.WriteHTML(dir, res, h); err != nil {
		return "", err
	}
	return filepath.Join(dir, runstore.ReportFile), nil
}

// loadRun reads the history of a stored run and the run's description from
// its results.json, if there is one. When results.json says the run did not
// finish (runstore.Head.Unfinished), the description's errors name
// runstore.UnfinishedChecked, so the run's verdict is at best unknown. A
// history whose last line was cut short is returned (without that line)
// with its error, which wraps history.ErrTruncated in a
// *history.LineError; any other bad history is an error alone.
func loadRun(arg string) (dir string, h *history.Table, info runstore.RunInfo, err error) {
	dir, path := runPaths(arg)
	if err := FitMemory(path); err != nil {
		return "", nil, info, err
	}
	h, herr := history.ReadTable(path)
	if herr != nil && !errors.Is(herr, history.ErrTruncated) {
		return "", nil, info, herr
	}
	info, err = loadInfo(dir)
	if err != nil {
		return "", nil, info, err
	}
	return dir, h, info, herr
}

// runPaths returns the run folder and the history file that arg, either
// of them, names.
func runPaths(arg string) (dir, path string) {
	dir, path = arg, filepath.Join(arg, runstore.HistoryFile)
	if st, err := os.Stat(arg); err == nil && !st.IsDir() {
		dir, path = filepath.Dir(arg), arg
	}
	return dir, path
}

// loadInfo reads the run's description from dir's results.json, as
// loadRun says.
func loadInfo(dir string) (info runstore.RunInfo, err error) {
	prev, rerr := runstore.ReadHead(dir)
	switch {
	case rerr == nil:
		info = prev.Run
		// A run whose driver stopped before checking (killed, crashed, cut
		// off by a job's timeout) left a prefix of its history: never
		// valid, whatever the prefix shows. The problem stays among the
		// run's errors, so that a second check finds it too.
		if prev.Unfinished() && !slices.Contains(info.Errors, runstore.UnfinishedChecked) {
			info.Errors = append(info.Errors, runstore.UnfinishedChecked)
		}
	case errors.Is(rerr, os.ErrNotExist):
		info = runstore.RunInfo{Name: filepath.Base(dir), Expect: "valid"} // resource mode unknown: check everything
	default:
		return info, rerr
	}
	return info, nil
}
