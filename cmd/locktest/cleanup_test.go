package main

import (
	"strings"
	"testing"
)

// TestCleanupAsksEveryProvider: `locktest cleanup` without --provider
// clears, from the registry, every provider whose leftovers need no
// settings to find, the local provider's (its network labs) and the docker
// provider's (its containers and networks), and each says what it found,
// also when there is nothing to do; --dry-run removes nothing.
func TestCleanupAsksEveryProvider(t *testing.T) {
	stdout, stderr, code := locktest(t, "cleanup", "--dry-run")
	if code != 0 {
		t.Fatalf("cleanup --dry-run: exit %d: %s%s", code, stdout, stderr)
	}
	var local, docker bool
	for _, l := range strings.Split(strings.TrimSpace(stdout), "\n") {
		switch {
		case strings.HasPrefix(l, "docker: "):
			docker = true
		case strings.HasPrefix(l, "nothing") || strings.HasPrefix(l, "would remove"):
			local = true
		case strings.HasPrefix(l, "removed"):
			t.Errorf("a dry run removed something: %s", l)
		}
	}
	if !local || !docker {
		t.Errorf("cleanup did not hear from the local (%v) and docker (%v) providers: %s", local, docker, stdout)
	}
}
