//go:build !linux

package local

import "syscall"

// sysProcAttr puts a node in its own process group. Outside Linux there is no
// parent-death signal, so a driver killed with SIGKILL leaves its nodes
// running.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
