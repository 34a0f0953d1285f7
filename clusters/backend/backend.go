// Package backend holds what locktest knows about each lock service,
// written once for every provider (local processes, docker containers,
// ssh hosts): one file per service. A provider asks it for a service's
// settings and their checks, its defaults and the roles its nodes can
// have, and runs the nodes its own way; no provider writes these facts
// again. It imports nothing of a provider's.
package backend

// ClockShimReason says why the LD_PRELOAD clock shim (package
// clusters/clockshim) cannot move the clocks of the nodes of backend, or
// "" when it can: a Go program reads the wall clock through the vDSO,
// not through the C library the shim wraps. Every provider asks here.
func ClockShimReason(backend string) string {
	switch backend {
	case "etcd":
		return etcdNoClockShim
	}
	return ""
}
