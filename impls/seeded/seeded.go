// Package seeded is the zoo: lock impls that are each a correct recipe of
// locktest with one classic bug planted in it, kept to measure how well the
// harness finds bugs it was not built around (docs/seeded-bugs.md holds
// what its default battery caught of each).
//
// Every impl here names the bug in one line (impls.Impl.Seeded) and the
// correct impl it varies (impls.Impl.SeededFrom), whose code it copies
// with that one thing broken, marked by a comment that starts "BUG:". The
// rest of the copy does what the correct recipe does, so that a difference
// between the two in a run is the bug's. They run against the real
// servers, with the client libraries of their recipes:
//
//   - over one Redis node, variants of redis-set-nx-px (SET NX PX plus an
//     INCR token in one Lua script, compare-and-delete release), whose
//     correct form is setNXPX in redis.go;
//   - over etcd, variants of etcd-lease-txn (a transaction that creates
//     the key on a fresh lease, token = the create revision), in etcd.go;
//   - over PostgreSQL, a variant of pg-advisory, in pg.go;
//   - over NATS JetStream, a variant of nats-kv-extend, in nats.go.
//
// A seeded impl is never in a default set: impls.Names, `locktest list`,
// the matrix's impls and the debate leave it out, and it runs only when
// named (`locktest list --seeded` lists them). Each file's test shows
// that its bug's mechanism is there, against a real server, so that the
// zoo cannot become correct unnoticed.
package seeded

import (
	"github.com/locktest/locktest/impls"
)

// register registers a seeded impl, with its Doc made of its correct
// recipe and its bug when it gives none.
func register(i impls.Impl) {
	if i.Doc == "" {
		i.Doc = i.SeededFrom + " with one bug planted: " + i.Seeded + "."
	}
	impls.Register(i)
}
