"""The client side of locktest's client protocol, for adapters in Python.

An adapter describes its client (caps) and gives a function that connects
it (connect); serve() then speaks the protocol of docs/clients.md on
standard input and output: it answers hello with the capabilities, and
each acquire and release with ok, fail or unknown.

The adapter's client raises Fail when an op certainly did nothing (the lock
is taken, the lease is not held) and Unknown when its outcome is not known;
any other exception is an unknown outcome too, named by its type. When its
library says a lease is gone, or may be gone, it calls lost() (from any
thread) or Leases.lost() for every lease held.
"""

import json
import sys
import threading

PROTOCOL = 1


class Fail(Exception):
    """The op certainly changed nothing."""


class Unknown(Exception):
    """The op's outcome is not known."""


class Leases:
    """The leases a client holds, by their values, and the unique values
    of its next ones ("p<process>-<n>"). A lease whose release is under way
    stays named (for lost()) until released() says the release returned;
    a listener on another thread may call lost() at any time."""

    def __init__(self, process):
        self.process, self.n, self.held = process, 0, {}
        self.names, self.mu = {}, threading.Lock()

    def next_value(self):
        self.n += 1
        return "p%d-%d" % (self.process, self.n)

    def granted(self, got, value, lease, lock=""):
        """The ok of an acquire that got (True) the lock: it holds lease
        under value; Fail when it did not get it. An adapter that sends lost
        notices names the lock, and calls released() once the release
        returned."""
        if not got:
            raise Fail("the lock is taken")
        self.held[value] = lease
        if lock:  # named: lost() can tell of it
            with self.mu:
                self.names[value] = lock
        return {"value": value}

    def take(self, value):
        """The lease to release, which is no longer held; Fail when there
        is none with this value."""
        lease = self.held.pop(value, None)
        if lease is None:
            raise Fail("no lease with this value")
        return lease

    def released(self, value):
        """Forget the lease of value, whose release returned or raised."""
        with self.mu:
            self.names.pop(value, None)

    def lost(self, reason, lock=None):
        """Tell locktest that every lease held (of lock, if given), and
        those whose release is under way, are lost or may be: reason is the
        library's word for it."""
        with self.mu:
            named = list(self.names.items())
        for value, name in named:
            if lock is None or name == lock:
                lost(name, value, reason)


_out = threading.Lock()


def _send(msg):
    with _out:
        sys.stdout.write(json.dumps(msg) + "\n")
        sys.stdout.flush()


def lost(lock, value, reason):
    """Tell locktest that the lease value of lock is lost, or may be: a
    lost notice, which may be sent at any time, from any thread."""
    _send({"type": "lost", "lock": lock or "", "value": value or "", "reason": reason})


def point(name):
    """Report reaching the pause point name, and wait for the driver's go."""
    _send({"type": "point", "point": name})
    while True:
        line = sys.stdin.readline()
        if not line:
            sys.exit(0)
        msg = json.loads(line)
        if msg.get("type") == "go" and msg.get("point") == name:
            return


def serve(caps, connect):
    """Speak the protocol until the end of input.

    caps is the hello_ok without its type and protocol: name, library,
    version, fenced, expires, validity, blocking, points, doc; or a
    function of the hello that returns it. connect(hello)
    returns the client: an object with acquire(lock, ttl_ms, deadline_ms),
    which returns a dict with value and, as the client can, token and
    valid_ms, and release(lock, value, token, deadline_ms), which returns a
    dict, with removed when the client can tell.
    """
    line = sys.stdin.readline()
    if not line:
        return
    hello = json.loads(line)
    if callable(caps):
        caps = caps(hello)
    _send(dict(caps, type="hello_ok", protocol=PROTOCOL))
    if hello.get("probe"):
        while sys.stdin.readline():
            pass
        return
    client = connect(hello)
    while True:
        line = sys.stdin.readline()
        if not line:
            return
        req = json.loads(line)
        kind, rid = req.get("type"), req.get("id")
        try:
            if kind == "acquire":
                reply = client.acquire(req["lock"], req.get("ttl_ms"), req.get("deadline_ms"))
            elif kind == "release":
                reply = client.release(req["lock"], req.get("value"), req.get("token"), req.get("deadline_ms"))
            else:
                raise Unknown("unknown request %r" % kind)
            _send(dict(reply, type="ok", id=rid))
        except Fail as e:
            _send({"type": "fail", "id": rid, "error": str(e) or "fail"})
        except Unknown as e:
            _send({"type": "unknown", "id": rid, "error": str(e) or "unknown"})
        except Exception as e:  # the library's own error: outcome unknown
            _send({"type": "unknown", "id": rid, "error": "%s: %s" % (type(e).__name__, e)})
