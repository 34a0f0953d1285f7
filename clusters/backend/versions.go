// How locktest asks the running servers of a lock service for their
// versions, each over its own protocol and with the client library locktest
// already uses for it: Redis's INFO server (go-redis), etcd's Status RPC
// (etcd's clientv3), ZooKeeper's four-letter word srvr, and SELECT
// version() for MariaDB/MySQL (go-sql-driver/mysql) and PostgreSQL (pgx).
// It needs only the nodes' addresses, so it works the same for every
// provider (local, docker, ssh), and it never fails: a server that cannot
// be asked is recorded as "unknown: " and the reason.

package backend

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/locktest/locktest/clusters"
)

// VersionTimeout bounds the question to one node, its connection included.
// The nodes are asked all at once, so Versions takes about as long as the
// slowest node, and at most this long.
const VersionTimeout = 2 * time.Second

// VersionUnknown is the prefix of the version of a server that could not be
// asked; the reason follows it.
const VersionUnknown = "unknown: "

// The server products Versions names, as keys of its map, are each
// backend's, in its file (ProductRedis, ProductEtcd, ...).

// VersionAnswer is one node's reply: the product it reports itself as and its
// version, or the error that kept it from answering.
type VersionAnswer struct {
	Node    string
	Product string
	Version string
	Err     error
}

// Versions asks every node of a cluster of backend (a backend name of the
// providers: "redis", "redis-sentinel", "redis-cluster", "etcd",
// "zookeeper", "mysql", "postgres") for its version, all nodes at once,
// each within VersionTimeout, and returns the versions by server product (see
// JoinVersions). The SQL servers are asked as the impls log in: params "user" and
// "password" (and "dbname" for PostgreSQL), by default root for MariaDB
// and postgres for PostgreSQL, without a password. A backend it does not
// know maps to "unknown: " and why. It never fails and never panics.
func Versions(ctx context.Context, backend string, nodes []clusters.Node, params map[string]string) map[string]string {
	s, ok := ServiceOf(backend)
	if !ok || s.Version == nil {
		return map[string]string{backend: VersionUnknown + fmt.Sprintf("locktest does not know how to ask a %q server for its version", backend)}
	}
	if len(nodes) == 0 {
		return VersionsNotAsked(backend, "the cluster has no nodes")
	}
	answers := make([]VersionAnswer, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() {
			nctx, cancel := context.WithTimeout(ctx, VersionTimeout)
			defer cancel()
			a := VersionAnswer{Node: n.Name, Product: ProductOf(backend, n)}
			product, version, err := s.Version(nctx, n.Addr, params)
			if err != nil {
				a.Err = err
			} else {
				a.Version = version
				if product != "" {
					a.Product = product
				}
			}
			answers[i] = a
		})
	}
	wg.Wait()
	return JoinVersions(answers)
}

// VersionsNotAsked returns the versions of a cluster of backend whose servers were
// not asked, for the reason why (its nodes never came up, say): its
// product maps to "unknown: " and why.
func VersionsNotAsked(backend, why string) map[string]string {
	return map[string]string{ProductOf(backend, clusters.Node{}): VersionUnknown + why}
}

// JoinVersions folds the nodes' answers into one version per product. A product's
// versions are joined in node order, each once ("7.0.15, 7.2.4"), so that
// a cluster whose nodes run different versions shows them all. Nodes that
// did not answer are added as "; unknown on n3: reason"; a product none of
// whose nodes answered is "unknown: reason", or, when the nodes failed for
// different reasons, "unknown: n1: reason; n2: reason".
func JoinVersions(answers []VersionAnswer) map[string]string {
	type acc struct {
		versions []string
		failed   []VersionAnswer
	}
	by := map[string]*acc{}
	var order []string
	for _, a := range answers {
		p := by[a.Product]
		if p == nil {
			p = &acc{}
			by[a.Product] = p
			order = append(order, a.Product)
		}
		if a.Err != nil {
			p.failed = append(p.failed, a)
		} else if !slices.Contains(p.versions, a.Version) {
			p.versions = append(p.versions, a.Version)
		}
	}
	out := make(map[string]string, len(by))
	for _, product := range order {
		p := by[product]
		same := true
		for _, f := range p.failed {
			same = same && f.Err.Error() == p.failed[0].Err.Error()
		}
		var failed []string
		for _, f := range p.failed {
			failed = append(failed, f.Node+": "+f.Err.Error())
		}
		switch {
		case len(p.versions) == 0 && same:
			out[product] = VersionUnknown + p.failed[0].Err.Error()
		case len(p.versions) == 0:
			out[product] = VersionUnknown + strings.Join(failed, "; ")
		case len(p.failed) == 0:
			out[product] = strings.Join(p.versions, ", ")
		default:
			out[product] = strings.Join(p.versions, ", ") + "; unknown on " + strings.Join(failed, "; ")
		}
	}
	return out
}

// firstLine returns s up to its first line break.
func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return strings.TrimRight(line, "\r")
}
