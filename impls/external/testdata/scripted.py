#!/usr/bin/python3
"""A client program for the external package's tests: it answers hello
with the capabilities in $CAPS (JSON), then each request after the delay
in $DELAY_MS for its type, echoing every request it read to stderr. With
$LOST set, it also prints lost notices: one unasked after hello_ok, and
one about the previous lease before each reply."""
import json, os, sys, time

caps = json.loads(os.environ.get("CAPS", '{"name": "scripted"}'))
delays = json.loads(os.environ.get("DELAY_MS", "{}"))
hello = json.loads(sys.stdin.readline())
sys.stdout.write(json.dumps(dict({"type": "hello_ok", "protocol": 1}, **caps)) + "\n")
if os.environ.get("LOST"):
    sys.stdout.write(json.dumps({"type": "lost", "reason": "idle news"}) + "\n")
sys.stdout.flush()
n = 0
for line in sys.stdin:
    req = json.loads(line)
    sys.stderr.write(line)
    sys.stderr.flush()
    n += 1
    time.sleep(delays.get(req["type"], 0) / 1000)
    if os.environ.get("LOST") and n > 1:
        sys.stdout.write(json.dumps({"type": "lost", "lock": "x", "value": "v%d" % (n - 1), "reason": "news mid-request"}) + "\n")
    reply = {"type": "ok", "id": req["id"]}
    if req["type"] == "acquire":
        reply.update(value="v%d" % n, token=n, valid_ms=500)
    sys.stdout.write(json.dumps(reply) + "\n")
    sys.stdout.flush()
