//go:build !linux && !(darwin && !ios)

package local

// removeShm does nothing where golang.org/x/sys has no System V shared
// memory calls: a killed PostgreSQL's segment stays until the next start of
// the server removes it.
func removeShm(id int) {}
