package run

import (
	"context"
	"os"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/history"
)

// StreamFrom is the size of a history file from which its check streams
// the file (checker.DecideFile) instead of holding it (history.ReadTable
// and checker.Decide), when the history allows it
// (checker.FileFacts.Streamable): a check that holds a history takes
// about CheckBytesPerFileByte times its file in memory, one that streams
// it what its checkers keep open, a few tens of MB (docs/performance.md,
// "Memory"). Below it, holding the history is faster and gives the report
// every op and porcupine's picture.
const StreamFrom = 256 << 20

// ReportOps is how many ops of a streamed history its report draws, from
// its start: the report says so, and its verdicts and anomalies cover the
// whole history.
const ReportOps = 200_000

// StreamFile reports whether the history file at path is to be checked
// as a stream, and then gives its facts: when the file is StreamFrom
// bytes or more, or too large for this machine to hold (FitMemory), or
// force asks for it, it reads it for its facts (checker.ScanFacts, once or
// twice) and says yes when they are streamable. A file it cannot stat is
// not streamed. The
// error is ScanFacts's (a bad line, a last line cut short), with which
// the caller holds the history as before, and meets the same error there.
func StreamFile(ctx context.Context, path string, force bool) (bool, checker.FileFacts, error) {
	st, err := os.Stat(path)
	if err != nil {
		return false, checker.FileFacts{}, nil
	}
	if st.Size() < StreamFrom && !force {
		if _, _, tooLarge := holdable(path, uint64(st.Size())); tooLarge == nil {
			return false, checker.FileFacts{}, nil
		}
	}
	ff, err := checker.ScanFacts(ctx, path)
	if err != nil {
		return false, ff, err
	}
	return ff.Streamable() == nil, ff, nil
}

// DecideStream decides the run of facts whose history is the file at
// path, whose facts are ff (StreamFile), by streaming it with tail after
// it (checker.DecideFile), and returns the Decision with the first
// ReportOps ops of the history for its report.
func DecideStream(ctx context.Context, path string, facts checker.RunFacts, ff checker.FileFacts, tail []history.Op) (checker.Decision, *history.Table, error) {
	d, err := checker.DecideFile(ctx, path, facts, ff, tail)
	if err != nil {
		return d, nil, err
	}
	h, err := history.ReadTableHead(ctx, path, ReportOps)
	return d, h, err
}
