#!/usr/bin/python3
"""OpenStack tooz's distributed locks through locktest's client protocol.

One adapter for tooz's lock drivers, chosen by the run's backend: redis://
(redis-py underneath), zookeeper:// (kazoo), etcd3:// (python-etcd3),
mysql:// (GET_LOCK, PyMySQL) and postgresql:// (advisory locks,
psycopg2). Each process is one tooz coordinator, started with its
heartbeat thread, as OpenStack services run it; each acquire is
coordinator.get_lock(name).acquire(blocking=...), waiting until a little
before the op's deadline where the driver can wait, else trying once.

tooz's users hold a lock until they release it: the heartbeat keeps a
lease (redis, etcd3) or a session (zookeeper) alive, so the adapter says
its leases do not expire, which is what its users believe. A process
stopped past the lock's timeout loses the lock without knowing it.
Options (--client-opt): blocking=false tries once.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from tooz import coordination  # noqa: E402

from locktest_client import Fail, Leases, Unknown, serve  # noqa: E402


def tooz_version():
    try:
        from importlib.metadata import version
        return version("tooz")
    except Exception:  # noqa: BLE001
        return "unknown"


def url(backend, nodes, ttl_s):
    """The tooz URL of the run's cluster, with timeouts of ttl_s seconds."""
    addr = nodes[0]["addr"]
    if backend == "redis":
        return "redis://%s?lock_timeout=%d&timeout=%d" % (addr, ttl_s, ttl_s)
    if backend == "zookeeper":
        return "zookeeper://%s?timeout=%d" % (",".join(n["addr"] for n in nodes), ttl_s)
    if backend == "etcd":
        return "etcd3://%s?lock_timeout=%d&timeout=%d" % (addr, ttl_s, max(ttl_s, 5))
    if backend == "mysql":
        return "mysql://root@%s/mysql" % addr
    if backend == "postgres":
        return "postgresql://postgres@%s/postgres" % addr
    raise SystemExit("tooz_lock: no tooz driver for backend %r" % backend)


DRIVERS = {"redis": "redis", "zookeeper": "zookeeper", "etcd": "etcd3", "mysql": "mysql", "postgres": "postgresql"}


def caps(backend):
    driver = DRIVERS.get(backend, backend)
    return {
        "name": "tooz-" + driver,
        "library": "tooz (%s driver)" % driver,
        "version": tooz_version(),
        "fenced": False,
        "expires": False,
        # etcd3's lock waits through python-etcd3, whose contended acquire
        # fails with Debian's tenacity: it tries once.
        "blocking": backend != "etcd",
        "doc": "OpenStack tooz's %s lock, held by a coordinator whose heartbeat keeps it alive" % driver,
    }


class Client:
    def __init__(self, hello):
        params = hello.get("params") or {}
        backend = hello["backend"]
        ttl_s = max(1, round(hello.get("ttl_ms", 1000) / 1000))
        self.blocking = params.get("blocking", "true") == "true" and caps(backend)["blocking"]
        self.retry_sleeps = backend in ("mysql", "postgres")
        member = ("locktest-p%d" % hello["process"]).encode()
        self.coord = coordination.get_coordinator(url(backend, hello["nodes"], ttl_s), member)
        self.coord.start(start_heart=True)
        self.leases = Leases(hello["process"])

    def wait(self, deadline_ms):
        """The blocking argument of an acquire with deadline_ms left.

        The mysql:// and postgresql:// drivers wait through tooz's retry
        helper, which sleeps up to 1s between attempts and checks its
        timeout only after a sleep: a wait may overrun its timeout by a
        second. Their waits get a second less, and an op deadline shorter
        than 1.5s makes them try once (the worker retries).
        """
        budget = (deadline_ms or 1000) * 0.75 / 1000
        if not self.blocking:
            return False
        if self.retry_sleeps:
            return budget - 1.0 if budget >= 1.5 else False
        return max(budget, 0.001)

    def acquire(self, lock, ttl_ms, deadline_ms):
        value = self.leases.next_value()
        lk = self.coord.get_lock(lock.encode())
        blocking = self.wait(deadline_ms)
        try:
            got = lk.acquire(blocking=blocking)
        except coordination.LockAcquireFailed as e:
            raise Fail(str(e))
        except coordination.ToozConnectionError as e:
            raise Unknown("ToozConnectionError: %s" % e)
        except Exception as e:  # noqa: BLE001
            if type(e).__name__ == "LockTimeout":  # kazoo's: it gave up and cleaned up
                raise Fail("LockTimeout: %s" % e)
            raise
        return self.leases.granted(got, value, lk)

    def release(self, lock, value, token, deadline_ms):
        lk = self.leases.take(value)
        try:
            released = lk.release()
        except coordination.ToozConnectionError as e:
            raise Unknown("ToozConnectionError: %s" % e)
        if not released:
            raise Fail("tooz says the lock was not held")
        return {}


if __name__ == "__main__":
    # The capabilities are the driver's, which hello's backend names.
    serve(lambda hello: caps(hello.get("backend", "")), Client)
