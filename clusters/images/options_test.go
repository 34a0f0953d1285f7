package images

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/locktest/locktest/clusters/backend"
)

// TestBuildOptionsCheck: a build names backends or images that exist and
// a node binary that is an executable file, or is refused before the
// engine is asked.
func TestBuildOptionsCheck(t *testing.T) {
	dir := t.TempDir()
	exe, data := filepath.Join(dir, "exe"), filepath.Join(dir, "data")
	if err := os.WriteFile(exe, nil, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(data, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		o    BuildOptions
		want string
	}{
		{BuildOptions{}, ""},
		{BuildOptions{Backends: append(backend.All(), Names()...), NodeBinary: exe}, ""},
		{BuildOptions{Backends: []string{"nope"}}, `images build: no backend "nope" (known: ` + strings.Join(backend.All(), ", ") + ")"},
		{BuildOptions{NodeBinary: data}, "--node-binary " + data + ": not an executable file"},
		{BuildOptions{NodeBinary: dir}, "--node-binary " + dir + ": not an executable file"},
		{BuildOptions{NodeBinary: filepath.Join(dir, "none")}, "not an executable file"},
	} {
		err := c.o.Check()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%+v: %v", c.o, err)
		case c.want != "" && (err == nil || !strings.HasSuffix(err.Error(), c.want)):
			t.Errorf("%+v: %v, want %q", c.o, err, c.want)
		}
	}
}

// NotBuilt names, for an image whose server locktest builds itself, the
// make target where this host has not built it, and nothing for the
// others, or once it is built.
func TestNotBuiltNamesTheMakeTarget(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("LOCKTEST_CACHE", cache)
	t.Setenv("PATH", t.TempDir())
	if why := NotBuilt("kube-apiserver"); !strings.Contains(why, "`make kube-apiserver`") {
		t.Errorf("NotBuilt(kube-apiserver) = %q, want the make target", why)
	}
	for _, im := range []string{"redis", "etcd", "nope"} {
		if why := NotBuilt(im); why != "" {
			t.Errorf("NotBuilt(%s) = %q, want nothing", im, why)
		}
	}
	bin := filepath.Join(cache, "kube-apiserver", backend.KubeVersion, "kube-apiserver")
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if why := NotBuilt("kube-apiserver"); why != "" {
		t.Errorf("NotBuilt(kube-apiserver) with it built = %q", why)
	}
}
