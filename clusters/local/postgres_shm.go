//go:build linux || (darwin && !ios)

package local

import "golang.org/x/sys/unix"

// removeShm removes the System V shared memory segment id; errors (it is
// gone already) are ignored.
func removeShm(id int) {
	_, _ = unix.SysvShmCtl(id, unix.IPC_RMID, nil)
}
