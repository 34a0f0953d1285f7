// Package all registers every lock impl of locktest with the impls registry.
// It has no API: import it for its side effect, as the CLI and the worker
// do, and then look impls up by name with impls.Lookup.
//
// Each backend family's package registers its impls from an init function;
// a new backend is added here with one more blank import.
package all

import (
	// etcd (3 members): etcd-mutex, etcd-lease-txn.
	_ "github.com/locktest/locktest/impls/etcd"
	// Single-node Redis: redis-set-nx-px, redis-setnx-expire,
	// redis-setnx-getset, redis-naive-del.
	_ "github.com/locktest/locktest/impls/redis"
	// MySQL/MariaDB: mysql-unique-insert, mysql-for-update, mysql-get-lock,
	// mysql-optimistic.
	_ "github.com/locktest/locktest/impls/mysql"
	// PostgreSQL: pg-advisory, pg-advisory-xact.
	_ "github.com/locktest/locktest/impls/pg"
	// ZooKeeper: zk-recipe, zk-lock.
	_ "github.com/locktest/locktest/impls/zk"
	// rueidislock (github.com/redis/rueidis): rueidislock.
	_ "github.com/locktest/locktest/impls/rueidislock"
	// Redlock (go-redsync/redsync v4): redlock, redlock-3, redlock-extend.
	_ "github.com/locktest/locktest/impls/redlock"
	// NATS JetStream KV (3 servers): nats-kv, nats-kv-extend.
	_ "github.com/locktest/locktest/impls/kubernetes"
	_ "github.com/locktest/locktest/impls/natskv"
	// The zoo: correct recipes with one bug planted each, run only when
	// named (impls.SeededNames; docs/seeded-bugs.md).
	_ "github.com/locktest/locktest/impls/seeded"
)
