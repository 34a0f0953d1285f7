package runstore

import (
	"maps"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
)

func TestLibraryVersions(t *testing.T) {
	bi := &debug.BuildInfo{
		Main: debug.Module{Path: "github.com/locktest/locktest", Version: "(devel)"},
		Deps: []*debug.Module{
			{Path: "github.com/redis/go-redis/v9", Version: "v9.23.0"},
			{Path: "github.com/go-redsync/redsync/v4", Version: "v4.18.1"},
			{Path: "go.etcd.io/etcd/client/v3", Version: "v3.7.3", Replace: &debug.Module{Path: "go.etcd.io/etcd/client/v3", Version: "v3.7.4"}},
			{Path: "github.com/jackc/pgx/v5", Version: "v5.12.0", Replace: &debug.Module{Path: "example.com/fork/pgx/v5", Version: "v5.12.1-fork"}},
			{Path: "github.com/go-zookeeper/zk", Version: "v1.0.4", Replace: &debug.Module{Path: "../zk"}},
		},
	}
	for _, tt := range []struct {
		name  string
		bi    *debug.BuildInfo
		paths []string
		want  map[string]string
	}{
		{"plain", bi, []string{"github.com/go-redsync/redsync/v4", "github.com/redis/go-redis/v9"},
			map[string]string{"github.com/go-redsync/redsync/v4": "v4.18.1", "github.com/redis/go-redis/v9": "v9.23.0"}},
		{"replaced by another version", bi, []string{"go.etcd.io/etcd/client/v3"}, map[string]string{"go.etcd.io/etcd/client/v3": "v3.7.4"}},
		{"replaced by a fork", bi, []string{"github.com/jackc/pgx/v5"},
			map[string]string{"github.com/jackc/pgx/v5": "v5.12.1-fork (replaced by example.com/fork/pgx/v5)"}},
		{"replaced by a directory", bi, []string{"github.com/go-zookeeper/zk"},
			map[string]string{"github.com/go-zookeeper/zk": "unknown: replaced by the directory ../zk"}},
		{"the main module", bi, []string{"github.com/locktest/locktest"}, map[string]string{"github.com/locktest/locktest": "(devel)"}},
		{"not in the binary", bi, []string{"github.com/go-sql-driver/mysql"},
			map[string]string{"github.com/go-sql-driver/mysql": "unknown: the binary's build info does not list this module"}},
		{"a test binary", &debug.BuildInfo{Main: bi.Main}, []string{"github.com/redis/go-redis/v9"},
			map[string]string{"github.com/redis/go-redis/v9": "unknown: the binary's build info lists no modules (as a go test binary's does not)"}},
		{"no build info", nil, []string{"github.com/redis/go-redis/v9"},
			map[string]string{"github.com/redis/go-redis/v9": "unknown: the binary has no build info"}},
		{"no libraries", bi, nil, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := libraryVersions(tt.bi, tt.paths); !maps.Equal(got, tt.want) {
				t.Errorf("libraryVersions = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestLibraryVersionsOfThisBinary reads the test binary's own build info:
// it names the main module but, as the test binary of a package other
// than main, lists no modules, and LibraryVersions says so rather than
// guess.
func TestLibraryVersionsOfThisBinary(t *testing.T) {
	const porcupine = "github.com/anishathalye/porcupine" // linked, through checker
	got := LibraryVersions([]string{porcupine, "github.com/locktest/locktest"})
	if v := got[porcupine]; !strings.HasPrefix(v, "v") && !strings.Contains(v, "lists no modules") {
		t.Errorf("porcupine's version is %q, want the one go.mod requires or why not", v)
	}
	if v := got["github.com/locktest/locktest"]; v == "" || strings.HasPrefix(v, "unknown") {
		t.Errorf("the main module's version is %q", v)
	}
}

func TestVersionOf(t *testing.T) {
	rev := []debug.BuildSetting{{Key: "vcs.revision", Value: "45024014edadde4f2ae33b2807dd8f5a6cf94008"}}
	dirty := append(slices.Clone(rev), debug.BuildSetting{Key: "vcs.modified", Value: "true"})
	for _, tt := range []struct {
		v        string
		settings []debug.BuildSetting
		want     string
	}{
		{"v0.0.0-20261126074016-45024014edad+dirty", dirty, "v0.0.0-20261126074016-45024014edad+dirty"},
		{"v0.0.0-20261126074016-45024014edad", rev, "v0.0.0-20261126074016-45024014edad"},
		{"(devel)", dirty, "(devel) 45024014edad (modified)"},
		{"v1.2.0", nil, "v1.2.0"},
	} {
		if got := versionOf(tt.v, tt.settings); got != tt.want {
			t.Errorf("versionOf(%q) = %q, want %q", tt.v, got, tt.want)
		}
	}
}
