// Package backend holds what locktest knows about each lock service,
// written once for every provider (local processes, docker containers,
// ssh hosts): one file per service. A provider asks it for a service's
// settings and their checks, its defaults and the roles its nodes can
// have, and runs the nodes its own way; no provider writes these facts
// again. It imports nothing of a provider's.
package backend
