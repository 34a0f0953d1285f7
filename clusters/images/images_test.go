package images

import (
	"context"
	"testing"
	"time"

	"github.com/locktest/locktest/testkit/dockertest"
	"github.com/locktest/locktest/testkit/gate"
)

// A build of the redis image, asked for by any backend that runs it, is
// reused while its inputs stay the same; Resolve gives it to each of those
// backends, ListBuilt lists it, and an image the run names wins over it.
func TestBuiltImageIsReusedAndResolved(t *testing.T) {
	e := dockertest.Engine(t)
	gate.Need(t, "redis-server")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	first, err := Build(ctx, e, BuildOptions{Backends: []string{"redis"}})
	if err != nil {
		t.Fatalf("build redis image: %v", err)
	}
	t.Logf("redis image %s: reused %v, %d MB, %v", first[0].Ref, first[0].Reused, first[0].Size>>20, first[0].Took.Round(time.Millisecond))
	again, err := Build(ctx, e, BuildOptions{Backends: []string{"redis-sentinel", "redis-cluster"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(again) != 1 || !again[0].Reused || again[0].ID != first[0].ID {
		t.Errorf("the second build made %+v, want the first's image reused", again)
	}
	for _, b := range []string{"redis", "redis-sentinel", "redis-cluster"} {
		img, err := Resolve(ctx, e, b, "")
		if err != nil {
			t.Fatal(err)
		}
		if !img.Built || img.Ref != first[0].Ref || img.Backend != b {
			t.Errorf("%s resolved to %+v, want the built image %s", b, img, first[0].Ref)
		}
	}
	all, err := ListBuilt(ctx, e)
	if err != nil {
		t.Fatal(err)
	}
	listed := false
	for _, b := range all {
		listed = listed || b.ID == first[0].ID
	}
	if !listed {
		t.Errorf("ListBuilt gave %+v, without %s", all, first[0].Ref)
	}
	const other = "locktest-test/none:absent"
	if img, err := Resolve(ctx, e, "redis", other); err != nil || img.Ref != other || img.Built {
		t.Errorf("with --image redis=%s: resolved %+v, %v", other, img, err)
	}
	if _, err := Resolve(ctx, e, "memcached", ""); err == nil {
		t.Error("a backend locktest does not have was resolved")
	}
}
