//go:build linux

package local

import "syscall"

// sysProcAttr puts a node in its own process group, so a terminal's Ctrl-C
// reaches only the driver (which stops the nodes itself), and asks the kernel
// to SIGKILL the node if the driver dies, so a crashed driver leaves nothing
// behind. Pdeathsig fires when the OS thread that started the node exits;
// the Go runtime does not retire threads that are not locked to a goroutine,
// so in practice that is when the driver process dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
