package matrix

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// RunBytes is what one matrix run leaves in the store, on the average:
// its history, resource log, report and results, and the nodes' data of
// the clusters it started (an etcd member preallocates 64 MB of log). A
// 5-seed matrix of every impl wrote 8.4 GB in its first 750 runs, 11.2 MB
// a run; the fault-free runs of the fast locks, 16 MB each, are the
// largest of those that start no cluster.
const RunBytes = 12 << 20

// CheckDisk refuses a matrix of jobs runs whose store, on the disk of
// store (or of its nearest folder that exists), has less free space than
// jobs runs of RunBytes: a full disk would stop it part way, after many
// minutes, with every run from then on unable to keep its history. free
// returns the bytes free to this user on the disk of a path (nil: the
// real one, statfs). Its error says what it found, in one line.
func CheckDisk(store string, jobs int, free func(path string) (uint64, error)) error {
	if free == nil {
		free = freeBytes
	}
	dir := existing(store)
	have, err := free(dir)
	if err != nil {
		return nil // nothing to go by: the runs say so if the disk fills
	}
	need := uint64(jobs) * RunBytes
	if have < need {
		return fmt.Errorf("matrix: the disk of the store %s has %s free, and %d runs may write up to %s (%s a run, measured); free some space or give --store on another disk",
			store, gib(have), jobs, gib(need), gib(RunBytes))
	}
	return nil
}

// existing is path, or its nearest parent folder that exists.
func existing(path string) string {
	p := filepath.Clean(path)
	for {
		if _, err := os.Stat(p); err == nil {
			return p
		}
		parent := filepath.Dir(p)
		if parent == p {
			return p
		}
		p = parent
	}
}

// freeBytes is the space free to this user on the disk of path.
func freeBytes(path string) (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return 0, err
	}
	return st.Bavail * uint64(st.Bsize), nil
}

// gib says n bytes in GB or MB, as people read disk space.
func gib(n uint64) string {
	if n >= 1<<30 {
		return fmt.Sprintf("%.1f GB", float64(n)/(1<<30))
	}
	return fmt.Sprintf("%d MB", n>>20)
}
