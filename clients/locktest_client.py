"""The client side of locktest's client protocol, for adapters in Python.

An adapter describes its client (caps) and gives a function that connects
it (connect); serve() then speaks the protocol of docs/clients.md on
standard input and output: it answers hello with the capabilities, and
each acquire and release with ok, fail or unknown.

The adapter's client raises Fail when an op certainly did nothing (the lock
is taken, the lease is not held) and Unknown when its outcome is not known;
any other exception is an unknown outcome too, named by its type.
"""

import json
import sys

PROTOCOL = 1


class Fail(Exception):
    """The op certainly changed nothing."""


class Unknown(Exception):
    """The op's outcome is not known."""


class Leases:
    """The leases a client holds, by their values, and the unique values
    of its next ones ("p<process>-<n>")."""

    def __init__(self, process):
        self.process, self.n, self.held = process, 0, {}

    def next_value(self):
        self.n += 1
        return "p%d-%d" % (self.process, self.n)

    def granted(self, got, value, lease):
        """The ok of an acquire that got (True) the lock: it holds lease
        under value; Fail when it did not get it."""
        if not got:
            raise Fail("the lock is taken")
        self.held[value] = lease
        return {"value": value}

    def take(self, value):
        """The lease to release, which is no longer held; Fail when there
        is none with this value."""
        lease = self.held.pop(value, None)
        if lease is None:
            raise Fail("no lease with this value")
        return lease


def _send(msg):
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


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
