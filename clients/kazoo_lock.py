#!/usr/bin/python3
"""kazoo's ZooKeeper Lock recipe (kazoo.recipe.lock.Lock) through
locktest's client protocol.

One KazooClient per process, whose session timeout is the run's ttl
(ZooKeeper bounds it by its tickTime); each acquire is a new Lock on
/locktest-kazoo/<lock> with a unique identifier, waiting for the lock until
a little before the op's deadline. The lock is an ephemeral sequential
znode: the server deletes it when the holder's session expires, which the
holder learns of only later, if at all: through the client's state
listener, which says SUSPENDED when the connection drops (the lease may be
gone) and LOST when the session expired (it is gone). Both go to locktest
as lost notices for the leases held. Options (--client-opt):
session-timeout (seconds) overrides the ttl.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import kazoo  # noqa: E402
from kazoo.client import KazooClient, KazooState  # noqa: E402
from kazoo.exceptions import LockTimeout  # noqa: E402
from kazoo.recipe.lock import Lock  # noqa: E402

from locktest_client import Fail, Leases, serve  # noqa: E402


def kazoo_version():
    try:
        from importlib.metadata import version
        return version("kazoo")
    except Exception:  # noqa: BLE001
        return getattr(kazoo, "__version__", "unknown")


CAPS = {
    "name": "kazoo",
    "library": "kazoo",
    "version": kazoo_version(),
    "fenced": False,
    "expires": False,
    "blocking": True,
    "notices": "its state listener hears SUSPENDED (may be lost) or LOST (lost)",
    "doc": "kazoo's Lock recipe: an ephemeral sequential znode that waits for its predecessor; the server frees it when the session expires, and the holder goes on believing it holds it",
}


class Client:
    def __init__(self, hello):
        params = hello.get("params") or {}
        timeout = float(params.get("session-timeout", hello.get("ttl_ms", 1000) / 1000))
        hosts = ",".join(n["addr"] for n in hello["nodes"])
        self.leases = Leases(hello["process"])
        self.zk = KazooClient(hosts=hosts, timeout=timeout)
        self.zk.add_listener(self.state_changed)
        self.zk.start(timeout=15)

    def state_changed(self, state):
        """kazoo's state listener (on kazoo's thread; it must not block)."""
        if state == KazooState.SUSPENDED:
            self.leases.lost("SUSPENDED: the connection to ZooKeeper dropped; the session, and the lease, may expire")
        elif state == KazooState.LOST:
            self.leases.lost("LOST: the session expired; the lease's ephemeral znode went with it")

    def acquire(self, lock, ttl_ms, deadline_ms):
        value = self.leases.next_value()
        lk = Lock(self.zk, "/locktest-kazoo/" + lock, identifier=value)
        wait = max((deadline_ms or 1000) * 0.75 / 1000, 0.001)
        try:
            got = lk.acquire(blocking=True, timeout=wait)
        except LockTimeout as e:
            raise Fail("timed out waiting: %s" % e)
        return self.leases.granted(got, value, lk, lock)

    def release(self, lock, value, token, deadline_ms):
        try:
            if not self.leases.take(value).release():
                raise Fail("kazoo says the lock was not acquired")
        finally:
            self.leases.released(value)
        return {}


if __name__ == "__main__":
    serve(CAPS, Client)
