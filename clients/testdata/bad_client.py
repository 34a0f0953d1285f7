#!/usr/bin/python3
"""A misbehaving client for locktest's tests of the client protocol.

It keeps no lock anywhere. The option mode (--client-opt mode=...) says how
it misbehaves:
  lie      answers every acquire and release ok: a client that claims
           locks it did not get;
  garbage  answers every request with a line that is not JSON;
  hang     never answers an acquire;
  wrong-id answers each request with the id of another;
  die      lies for a few ops, then exits in the middle of an acquire.
"""

import json
import sys
import time

hello = json.loads(sys.stdin.readline())
sys.stdout.write(json.dumps({"type": "hello_ok", "protocol": 1, "name": "bad-client", "library": "none",
                             "version": "0", "fenced": False, "expires": False, "blocking": False}) + "\n")
sys.stdout.flush()
mode = (hello.get("params") or {}).get("mode", "lie")
n = 0
for line in sys.stdin:
    req = json.loads(line)
    n += 1
    if mode == "garbage":
        out = "this is not JSON"
    elif mode == "hang" and req["type"] == "acquire":
        time.sleep(3600)
        continue
    elif mode == "wrong-id":
        out = json.dumps({"type": "ok", "id": req["id"] + 1000, "value": "v%d" % n})
    elif mode == "die" and n > 6 and req["type"] == "acquire":
        sys.stderr.write("bad-client: dying on purpose at %.3f (Unix time)\n" % time.time())
        sys.exit(3)
    else:
        out = json.dumps({"type": "ok", "id": req["id"], "value": "v%d-%d" % (hello["process"], n)})
    sys.stdout.write(out + "\n")
    sys.stdout.flush()
