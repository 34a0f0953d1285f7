package impls

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestValuesAreUnique: a client's values never repeat, and they name the
// process and count up.
func TestValuesAreUnique(t *testing.T) {
	form := regexp.MustCompile(`^p7-([0-9]+)-[0-9a-f]{8}$`)
	v := Values{Process: 7}
	seen := map[string]bool{}
	for i := 1; i <= 1000; i++ {
		s := v.Next()
		m := form.FindStringSubmatch(s)
		if m == nil || m[1] != strconv.Itoa(i) {
			t.Fatalf("value %d is %q, want p7-%d-<8 hex digits>", i, s, i)
		}
		if seen[s] {
			t.Fatalf("value %q handed out twice", s)
		}
		seen[s] = true
	}
}

// TestPassCallsTheHook: Pass hands the point to the hook, and is a no-op
// with no hook.
func TestPassCallsTheHook(t *testing.T) {
	var got []string
	Config{Hook: func(p string) { got = append(got, p) }}.Pass("here")
	Config{}.Pass("nowhere")
	if len(got) != 1 || got[0] != "here" {
		t.Fatalf("hook saw %v, want [here]", got)
	}
}

// nopClient is a Client that does nothing, for Wrap's test.
type nopClient struct{ Client }

// TestWrapBuildsOrFails: Wrap's New hands what build made to wrap, and
// returns build's error untouched.
func TestWrapBuildsOrFails(t *testing.T) {
	boom := errors.New("boom")
	build := func(cfg Config) (int, error) {
		if cfg.Process < 0 {
			return 0, boom
		}
		return cfg.Process * 10, nil
	}
	var got int
	newFn := Wrap(build, func(n int) Client { got = n; return nopClient{} })
	if c, err := newFn(context.Background(), Config{Process: 4}); err != nil || c == nil || got != 40 {
		t.Fatalf("New = %v, %v with %d wrapped; want a client of 40", c, err, got)
	}
	if _, err := newFn(context.Background(), Config{Process: -1}); !errors.Is(err, boom) {
		t.Fatalf("New with a failing build: %v, want boom", err)
	}
}

// TestNotSentMarksAnError: NotSent keeps the message and the cause of the
// error it marks, errors.Is finds the mark through further wrapping, an
// unmarked error has none, and nil stays nil.
func TestNotSentMarksAnError(t *testing.T) {
	cause := errors.New("dial: i/o timeout")
	err := fmt.Errorf("acquire: %w", NotSent(cause))
	if !errors.Is(err, ErrNotSent) || !errors.Is(err, cause) {
		t.Errorf("%v: want both the mark and its cause", err)
	}
	if err.Error() != "acquire: dial: i/o timeout" {
		t.Errorf("message %q, want the cause's", err.Error())
	}
	if errors.Is(cause, ErrNotSent) || errors.Is(ErrNotAcquired, ErrNotSent) {
		t.Error("an unmarked error is taken for not sent")
	}
	if NotSent(nil) != nil {
		t.Error("NotSent(nil) is not nil")
	}
}

// TestFuncPackage: the package of a function, a method, a closure and a
// package without a slash in its path.
func TestFuncPackage(t *testing.T) {
	for name, want := range map[string]string{
		"github.com/locktest/locktest/impls/redlock.init.0.func1": "github.com/locktest/locktest/impls/redlock",
		"github.com/locktest/locktest/impls/redis.init":           "github.com/locktest/locktest/impls/redis",
		"example.com/a.v2/b.(*T).M":                               "example.com/a.v2/b",
		"main.main":                                               "main",
	} {
		if got := funcPackage(name); got != want {
			t.Errorf("funcPackage(%q) = %q, want %q", name, got, want)
		}
	}
}

// TestSeededImplsRunOnlyWhenNamed: a seeded impl is found by Lookup and
// listed by SeededNames, never by Names; Register refuses one that names
// no recipe.
func TestSeededImplsRunOnlyWhenNamed(t *testing.T) {
	Register(Impl{Name: "test-plain", Backend: "redis"})
	Register(Impl{Name: "test-seeded", Backend: "redis", Seeded: "a bug", SeededFrom: "test-plain"})
	if i, err := Lookup("test-seeded"); err != nil || i.Seeded != "a bug" || !IsSeeded("test-seeded") || IsSeeded("test-plain") {
		t.Fatalf("Lookup = %+v, %v", i, err)
	}
	if slices.Contains(Names(), "test-seeded") || !slices.Contains(Names(), "test-plain") {
		t.Errorf("Names = %v: want the plain impl and not the seeded one", Names())
	}
	if got := SeededNames(); !slices.Equal(got, []string{"test-seeded"}) {
		t.Errorf("SeededNames = %v", got)
	}
	if _, err := Lookup("nope"); err == nil || !strings.Contains(err.Error(), "seeded with a bug, for measuring the harness: test-seeded") {
		t.Errorf("Lookup of an unknown impl: %v, want the seeded ones named apart", err)
	}
	defer func() {
		if recover() == nil {
			t.Error("Register took a seeded impl without its recipe")
		}
	}()
	Register(Impl{Name: "test-orphan", Backend: "redis", Seeded: "a bug"})
}
