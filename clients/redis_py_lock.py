#!/usr/bin/python3
"""redis-py's redis.lock.Lock through locktest's client protocol.

Against backend redis it talks to the one node; against redis-sentinel it
asks the sentinels for the master (redis.sentinel.Sentinel.master_for),
as redis-py's users of a replicated Redis do. Each acquire is a new Lock
with timeout = the run's ttl: SET NX PX with a random token, released by
redis-py's compare-and-delete script. Options (--client-opt):
blocking=true waits for the lock until a little before the deadline
(default: try once); master-name names the sentinels' master (default
locktest).
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import redis  # noqa: E402
import redis.sentinel  # noqa: E402
from redis.exceptions import LockError  # noqa: E402

from locktest_client import Fail, Leases, Unknown, serve  # noqa: E402

CAPS = {
    "name": "redis-py",
    "library": "redis-py",
    "version": redis.__version__,
    "fenced": False,
    "expires": True,
    "validity": "ttl",
    "blocking": False,
    "doc": "redis-py's Lock: SET NX PX with a random token, released by a compare-and-delete script; a lease with no fencing token",
}


def hostport(addr):
    host, port = addr.rsplit(":", 1)
    return host, int(port)


class Client:
    def __init__(self, hello):
        params = hello.get("params") or {}
        self.blocking = params.get("blocking") == "true"
        timeout = max(hello.get("deadline_ms", 1000), 100) / 1000
        nodes = hello["nodes"]
        if hello["backend"] == "redis-sentinel":
            sentinels = [hostport(n["addr"]) for n in nodes if n.get("role") == "sentinel"]
            s = redis.sentinel.Sentinel(sentinels, socket_timeout=timeout)
            self.r = s.master_for(params.get("master-name", "locktest"), socket_timeout=timeout)
        else:
            host, port = hostport(nodes[0]["addr"])
            self.r = redis.Redis(host=host, port=port, socket_timeout=timeout, socket_connect_timeout=timeout)
        self.leases = Leases(hello["process"])

    def acquire(self, lock, ttl_ms, deadline_ms):
        wait = max((deadline_ms or 1000) * 0.75 / 1000, 0.001)
        lk = self.r.lock(lock, timeout=ttl_ms / 1000, blocking=self.blocking, blocking_timeout=wait)
        try:
            got = lk.acquire()
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as e:
            raise Unknown("%s: %s" % (type(e).__name__, e))
        return self.leases.granted(got, lk.local.token.decode() if got else "", lk)

    def release(self, lock, value, token, deadline_ms):
        lk = self.leases.take(value)
        try:
            lk.release()
        except LockError as e:  # LockNotOwnedError among them: not held
            raise Fail(str(e))
        return {"removed": value}


if __name__ == "__main__":
    serve(CAPS, Client)
