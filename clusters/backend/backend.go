// Package backend holds what locktest knows about each lock service,
// written once for every provider (local processes, docker containers,
// ssh hosts): one file per service (redis.go, sentinel.go,
// rediscluster.go, etcd.go, zookeeper.go, mysql.go, postgres.go), each of
// which registers its Service and its kinds of node (Register). A
// provider asks the registry for a service's settings and their checks,
// its layout, its nodes' launches, readiness and roles, and runs the nodes
// its own way; no provider writes these facts again, and no generic file
// of this package names a backend. It imports nothing of a provider's.
package backend
