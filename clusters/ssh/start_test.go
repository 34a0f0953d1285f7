package ssh_test

import (
	"context"
	"strings"
	"testing"
)

// A server that exits during its start-up ends the start with the last
// line of its output, not with a wait for it to serve until the kind's
// ready timeout (30 s for Redis) runs out.
func TestAServerThatExitsAtOnceEndsTheStart(t *testing.T) {
	ctx, conns, cl, _ := labCluster(t, "redis", 1)
	h := conns[0]
	bad := "/tmp/locktest-exits-at-once-redis-server"
	if _, err := h.Run(ctx, "printf '#!/bin/sh\\necho \"FATAL CONFIG FILE ERROR: not a redis.conf\" >&2\\nexit 1\\n' > "+bad+" && chmod 755 "+bad); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Run(context.Background(), "rm -f "+bad) })
	h.Host.Binaries = map[string]string{"redis-server": bad}
	err := cl.Start(ctx)
	t.Cleanup(func() { cl.Stop(context.Background()) })
	if err == nil {
		t.Fatal("a server that exits at once started")
	}
	if msg := err.Error(); !strings.Contains(msg, "exited during start-up") || !strings.Contains(msg, "FATAL CONFIG FILE ERROR: not a redis.conf") {
		t.Errorf("start: %v; want it to say the server exited, with its last line", err)
	}
}
