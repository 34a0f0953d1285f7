package golib

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// matchGolden compares got with testdata/name; UPDATE_GOLDEN=1 rewrites
// the file.
func matchGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	golden := filepath.Join("testdata", name)
	if os.Getenv("UPDATE_GOLDEN") != "" {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("got\n%s\nwant (%s)\n%s", got, golden, want)
	}
}

// TestGoModPinsAndReplaces: the adapter's go.mod requires locktest from its
// tree and each pin, replaces each pinned module by itself at its
// version, and carries locktest's own replaces but those of a pinned
// module, a relative folder made absolute.
func TestGoModPinsAndReplaces(t *testing.T) {
	lt, err := os.ReadFile(filepath.Join("testdata", "locktest.go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	pins := []Pin{{"github.com/go-redsync/redsync/v4", "v4.11.0"}, {"github.com/redis/go-redis/v9", "v9.5.1"}}
	got, err := GoMod("/src/locktest", lt, pins)
	if err != nil {
		t.Fatal(err)
	}
	matchGolden(t, "adapter.go.mod", got)
}

// TestGoModNeedsLocktestsGoMod: the tree given must be locktest's.
func TestGoModNeedsLocktestsGoMod(t *testing.T) {
	_, err := GoMod("/src/other", []byte("module example.com/other\n\ngo 1.26.0\n"), []Pin{{"example.com/m", "v1.0.0"}})
	if err == nil || !strings.Contains(err.Error(), "not locktest's") {
		t.Fatalf("GoMod of another module: %v, want an error saying it is not locktest's", err)
	}
}

// TestMainGoServesTheImplsPackage: main.go imports the impl's package
// alone and serves through external.ServeAdapter.
func TestMainGoServesTheImplsPackage(t *testing.T) {
	got, err := MainGo("github.com/locktest/locktest/impls/redlock", []Pin{{"github.com/go-redsync/redsync/v4", "v4.11.0"}})
	if err != nil {
		t.Fatal(err)
	}
	matchGolden(t, "adapter.main.go.txt", got)
}

// TestParsePin: module@version with a canonical version, nothing else.
func TestParsePin(t *testing.T) {
	for _, tc := range []struct{ in, err string }{
		{"github.com/go-redsync/redsync/v4@v4.11.0", ""},
		{"github.com/redis/go-redis/v9@v9.0.0-20230101000000-abcdefabcdef", ""},
		{"github.com/go-redsync/redsync/v4", "want module@version"},
		{"@v4.11.0", "want module@version"},
		{"github.com/go-redsync/redsync/v4@latest", "not a canonical semantic version"},
		{"github.com/go-redsync/redsync/v4@v4.11", "not a canonical semantic version"},
		{"github.com/go-redsync/redsync/v4@v3.1.0", "should be v4"},
		{"not a path@v1.0.0", "invalid"},
	} {
		p, err := ParsePin(tc.in)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("ParsePin(%q): %v", tc.in, err)
		case tc.err == "" && p.String() != tc.in:
			t.Errorf("ParsePin(%q) = %v", tc.in, p)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("ParsePin(%q): error %v, want one containing %q", tc.in, err, tc.err)
		}
	}
	if _, err := ParsePins([]string{"example.com/m@v1.0.0", "example.com/m@v1.1.0"}); err == nil || !strings.Contains(err.Error(), "pinned twice") {
		t.Errorf("a module pinned twice: %v", err)
	}
}

// TestFirstError: of the go command's output, the first compiler error
// with its file relative to locktest's tree; else the go command's own
// complaint; else the last line.
func TestFirstError(t *testing.T) {
	build := "# github.com/locktest/locktest/impls/redlock\n" +
		"../../../../src/locktest/impls/redlock/redlock.go:250:3: undefined: redsync.WithTimeoutFactor\n" +
		"../../../../src/locktest/impls/redlock/redlock.go:260:9: undefined: redsync.ErrExtendFailed\n"
	tidy := "go: finding module for package github.com/go-redsync/redsync/v4/redis/goredis/v9\n" +
		"go: locktest-adapter imports\n\tgithub.com/locktest/locktest/impls/redlock imports\n" +
		"go: github.com/go-redsync/redsync/v4@v4.99.0: invalid version: unknown revision v4.99.0\n"
	for _, tc := range []struct{ text, want string }{
		{build, "impls/redlock/redlock.go:250:3: undefined: redsync.WithTimeoutFactor"},
		{"/elsewhere/x.go:1:2: bad\n", "/elsewhere/x.go:1:2: bad"},
		{tidy, "finding module for package github.com/go-redsync/redsync/v4/redis/goredis/v9"},
		{"something\nwent wrong\n", "went wrong"},
		{"", "exit status 1"},
	} {
		if got := firstError(tc.text, "/cache/locktest/golib/.build-1", "/src/locktest", errors.New("exit status 1")); got != tc.want {
			t.Errorf("firstError(%q) = %q, want %q", tc.text, got, tc.want)
		}
	}
}

// TestBuildErrorIsOneLine: a failed build names the pins, the impl and the
// first error, in one line.
func TestBuildErrorIsOneLine(t *testing.T) {
	err := &BuildError{Pins: []Pin{{"github.com/go-redsync/redsync/v4", "v4.0.0"}}, Impl: "redlock", Step: "go build",
		First: "impls/redlock/redlock.go:250:3: undefined: redsync.WithTimeoutFactor"}
	want := "github.com/go-redsync/redsync/v4@v4.0.0: the impl redlock does not build with it: impls/redlock/redlock.go:250:3: undefined: redsync.WithTimeoutFactor"
	if err.Error() != want {
		t.Errorf("got  %s\nwant %s", err, want)
	}
	err.Step = "go mod tidy"
	if !strings.HasPrefix(err.Error(), "github.com/go-redsync/redsync/v4@v4.0.0: go mod tidy failed: ") {
		t.Errorf("a failed tidy: %s", err)
	}
}

// TestFolderName: the cache folder names the package, the pins and the
// checksum.
func TestFolderName(t *testing.T) {
	got := folderName("github.com/locktest/locktest/impls/redlock", []Pin{{"github.com/go-redsync/redsync/v4", "v4.11.0"}}, "0123456789abcdef")
	if want := "redlock-redsync@v4.11.0-0123456789abcdef"; got != want {
		t.Errorf("folderName = %q, want %q", got, want)
	}
}

// TestDirFollowsTheEnvironment: LOCKTEST_CACHE first, then XDG_CACHE_HOME.
func TestDirFollowsTheEnvironment(t *testing.T) {
	t.Setenv("LOCKTEST_CACHE", "/c")
	if d, _ := Dir(); d != "/c/golib" {
		t.Errorf("with LOCKTEST_CACHE: %s", d)
	}
	t.Setenv("LOCKTEST_CACHE", "")
	t.Setenv("XDG_CACHE_HOME", "/x")
	if d, _ := Dir(); d != "/x/locktest/golib" {
		t.Errorf("with XDG_CACHE_HOME: %s", d)
	}
}
