#!/bin/sh
# A client program that cannot start, for locktest's tests.
echo "cannot start: no such library" >&2
exit 3
