package external

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/locktest/locktest/impls"
)

// syncBuffer is a bytes.Buffer safe for the program's stderr copier.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// scripted starts testdata/scripted.py with the capabilities caps and the
// reply delays delays (JSON), and returns the client and what the program
// read.
func scripted(t *testing.T, caps, delays string) (*Client, *syncBuffer) {
	t.Helper()
	return scriptedLost(t, caps, delays, nil)
}

// scriptedLost is scripted with cfg.Lost set to lost.
func scriptedLost(t *testing.T, caps, delays string, lost func(lock, value, reason string)) (*Client, *syncBuffer) {
	t.Helper()
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("no /usr/bin/python3")
	}
	t.Setenv("CAPS", caps)
	t.Setenv("DELAY_MS", delays)
	var read syncBuffer
	start := time.Now()
	c, err := New(context.Background(), Spec{Command: []string{"testdata/scripted.py"}, Backend: "redis"},
		impls.Config{Addrs: []string{"127.0.0.1:1"}, Now: func() time.Duration { return time.Since(start) }, Lost: lost},
		Run{Locks: []string{"x"}, TTL: time.Second, Deadline: time.Second}, &read)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, &read
}

// TestALeaseCarriesWhatTheCapabilitiesAllow: a token only from a fenced
// client, a validity only from one whose leases expire.
func TestALeaseCarriesWhatTheCapabilitiesAllow(t *testing.T) {
	for _, tc := range []struct {
		caps        string
		token, till bool
	}{
		{`{"name": "a", "fenced": true, "expires": true}`, true, true},
		{`{"name": "b", "fenced": false, "expires": false}`, false, false},
	} {
		c, _ := scripted(t, tc.caps, `{}`)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		l, err := c.Acquire(ctx, "x", time.Second)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if l.HasToken != tc.token || (l.ValidUntil != 0) != tc.till || l.Value == "" {
			t.Errorf("caps %s: lease %+v, want token %v, validity %v", tc.caps, l, tc.token, tc.till)
		}
	}
}

// TestALockGrantedTooLateIsGivenBack: an acquire answered after its
// deadline is of unknown outcome, and its lock is released before the
// next request, which gets its own answer.
func TestALockGrantedTooLateIsGivenBack(t *testing.T) {
	c, read := scripted(t, `{"name": "slow"}`, `{"acquire": 300}`)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	_, err := c.Acquire(ctx, "x", time.Second)
	cancel()
	if err == nil || errors.Is(err, impls.ErrNotAcquired) || !strings.Contains(err.Error(), "before the deadline") {
		t.Fatalf("acquire past its deadline: %v, want an unknown outcome", err)
	}
	// Wait for the late ok itself, not for a time: on a loaded machine
	// the program may answer long after its 300 ms.
	for end := time.Now().Add(10 * time.Second); len(c.p.lines) == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("the late ok never came")
		}
	}
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	l, err := c.Acquire(ctx, "x", time.Second)
	cancel()
	if err != nil || l.Value != "v3" {
		t.Fatalf("next acquire: %+v %v, want the third request's lease v3", l, err)
	}
	lines := strings.Split(strings.TrimSpace(read.String()), "\n")
	if len(lines) != 3 || !strings.Contains(lines[1], `"type":"release"`) || !strings.Contains(lines[1], `"value":"v1"`) {
		t.Fatalf("the program read %q, want acquire, the release of v1, acquire", lines)
	}
}

// TestLostNoticesGoToConfigLost: a notice printed while no request is in
// flight, and one printed in the middle of a request, both reach
// Config.Lost, with their lease and reason, and neither is taken for the
// request's answer.
func TestLostNoticesGoToConfigLost(t *testing.T) {
	t.Setenv("LOST", "1")
	var mu sync.Mutex
	var got []string
	c, _ := scriptedLost(t, `{"name": "noisy", "notices": "a test"}`, `{}`, func(lock, value, reason string) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, lock+"|"+value+"|"+reason)
	})
	if c.Caps().Notices != "a test" {
		t.Errorf("caps notices %q, want the hello_ok's", c.Caps().Notices)
	}
	for i, want := range []string{"v1", "v2"} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		l, err := c.Acquire(ctx, "x", time.Second)
		cancel()
		if err != nil || l.Value != want {
			t.Fatalf("acquire %d: %+v %v, want lease %s", i+1, l, err, want)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"||idle news", "x|v1|news mid-request"}
	if !slices.Equal(got, want) {
		t.Errorf("notices %q, want %q", got, want)
	}
}

// TestProbeSaysWhyAProgramCannotBeUsed: a program that exits at start,
// one that answers in another protocol, and a missing one.
func TestProbeSaysWhyAProgramCannotBeUsed(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	for _, tc := range []struct {
		cmd  []string
		want string
	}{
		{[]string{"sh", "-c", "echo broken library >&2; exit 4"}, "exited before it answered hello (exit status 4): broken library"},
		{[]string{"sh", "-c", `read l; echo '{"type":"hello_ok","protocol":9,"name":"x"}'`}, "speaks protocol 9"},
		{[]string{"sh", "-c", `read l; echo garbage`}, "not JSON"},
		{[]string{"/nonexistent/program"}, "no such file"},
	} {
		_, err := Probe(context.Background(), Spec{Command: tc.cmd}, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: %v, want one line with %q", tc.cmd, err, tc.want)
		}
	}
}
