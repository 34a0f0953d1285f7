package durable

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/locktest/locktest/clusters"
)

// The steps below are a power cut of a node whose data directory is on
// the machine that runs them: the local provider's processes, the docker
// provider's bind mounts. Each provider kills its node its own way, under
// its own lock, and calls them for the rest. (The ssh provider makes the
// same cut on the node's host, in one command there: `locktest node
// durable`.)

// CutFiles cuts the files under dir as a power loss leaves them, once the
// node is dead: plan says what the loss cuts, Apply makes the cuts. It
// returns the cuts as a clusters.PowerCutter reports them (those planned,
// also when some could not be made), logs them on lg with attrs (the
// node's name and address), and says what failed as "<who>: cut the files
// of <node>: …".
func CutFiles(lg *slog.Logger, who, node, dir string, plan func() ([]Cut, error), attrs ...any) ([]clusters.FileCut, error) {
	cuts, err := plan()
	out := FileCuts(cuts)
	if err == nil {
		err = Apply(dir, cuts)
	}
	lg.Info("node power cut", append(attrs, "files_cut", len(cuts), "bytes_lost", Lost(cuts))...)
	if err != nil {
		return out, fmt.Errorf("%s: cut the files of %s: %w", who, node, err)
	}
	return out, nil
}

// CutOnWrite waits, for at most within, until the files under dir hold an
// unsynced grant (WaitForWrite of GrantWrite, reading them every Poll),
// and then cuts the node's power with cut; at the end of within it cuts
// all the same. An error of the wait wraps clusters.ErrUntouched and says
// "<who>: wait for an unsynced write of <node>: …": nothing was done to
// the node.
func CutOnWrite(ctx context.Context, who, node, dir string, plan func() ([]Cut, error), within time.Duration, cut func() ([]clusters.FileCut, error)) ([]clusters.FileCut, error) {
	if _, err := WaitForWrite(ctx, dir, plan, GrantWrite, within); err != nil {
		return nil, fmt.Errorf("%w: %s: wait for an unsynced write of %s: %w", clusters.ErrUntouched, who, node, err)
	}
	return cut()
}
