package clockrate

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// buildCheck builds testdata/ratecheck with the patched runtime.
func buildCheck(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command to build with")
	}
	goroot, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Fatalf("go env GOROOT: %v", err)
	}
	dir := t.TempDir()
	overlay, err := Overlay(strings.TrimSpace(string(goroot)), filepath.Join(dir, "overlay"), nil)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "ratecheck")
	args := append(append([]string{"build", "-o", bin}, BuildFlags(overlay)...), "./testdata/ratecheck")
	if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return bin
}

// TestRate runs a program built with the patched runtime at a fast and at
// a slow rate: its sleep and its timer of d each, measured on its own
// clock, take 2d by that clock, and d/rate each of real time. It then
// moves the program's wall clock an hour ahead, which leaves its
// monotonic clock alone. The bounds
// are one-sided where a loaded machine can only add time: a slow clock's
// sleeps take at least 2d/rate of real time; a fast clock's, well under
// the 2d the real clock would take.
func TestRate(t *testing.T) {
	bin := buildCheck(t)
	for _, tc := range []struct {
		rate    string
		d       time.Duration
		minWall time.Duration
		maxWall time.Duration
	}{
		{"4", time.Second, 0, 1500 * time.Millisecond},                     // 500 ms expected; 2 s on the real clock
		{"0.5", 200 * time.Millisecond, 790 * time.Millisecond, time.Hour}, // 800 ms expected; 400 ms on the real clock
	} {
		out, err := exec.Command(bin, tc.rate, tc.d.String()).Output()
		if err != nil {
			t.Fatalf("ratecheck %s: %v", tc.rate, err)
		}
		var got struct {
			Mono      time.Duration `json:"mono_ns"`
			Wall      time.Duration `json:"wall_ns"`
			WentBack  bool          `json:"went_back"`
			WallAhead time.Duration `json:"wall_ahead_ns"`
			MonoJump  time.Duration `json:"mono_after_jump_ns"`
		}
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("ratecheck %s: %v: %s", tc.rate, err, out)
		}
		t.Logf("rate %s: a sleep and a timer of %v each took %v by the program's clock, %v of real time", tc.rate, tc.d, got.Mono, got.Wall)
		if got.Mono < 2*tc.d {
			t.Errorf("rate %s: the sleep and the timer took %v by the program's clock, want at least %v", tc.rate, got.Mono, 2*tc.d)
		}
		if got.Wall < tc.minWall || got.Wall > tc.maxWall {
			t.Errorf("rate %s: they took %v of real time, want %v to %v", tc.rate, got.Wall, tc.minWall, tc.maxWall)
		}
		if got.WentBack {
			t.Errorf("rate %s: the monotonic clock went back when the rate changed back", tc.rate)
		}
		// The wall jump: time.Now's wall reading an hour ahead of the
		// system's, its monotonic clock where it was.
		if got.WallAhead < time.Hour-time.Second || got.WallAhead > time.Hour+time.Second {
			t.Errorf("rate %s: after SetWall(1h) the wall reading is %v from the system's, want 1h", tc.rate, got.WallAhead)
		}
		if got.MonoJump < 0 || got.MonoJump > time.Minute {
			t.Errorf("rate %s: the monotonic clock moved %v across the wall jump, want ~0", tc.rate, got.MonoJump)
		}
	}
}

// TestOverlayRefusesAnotherRuntime: a runtime without the text a patch
// replaces is an error naming the file, never a build at the real rate.
func TestOverlayRefusesAnotherRuntime(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "src", "runtime"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Overlay(root, t.TempDir(), nil); err == nil || !strings.Contains(err.Error(), "time_nofake.go") {
		t.Errorf("a runtime without the files: %v", err)
	}
	for _, f := range []string{"time_nofake.go", "netpoll_epoll.go"} {
		if err := os.WriteFile(filepath.Join(root, "src", "runtime", f), []byte("package runtime\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Overlay(root, t.TempDir(), nil); err == nil || !strings.Contains(err.Error(), "is not the one the patch was written for") {
		t.Errorf("a runtime of another shape: %v", err)
	}
}

// TestOverlaySwapsInExtraFiles: a file of the program's own sources given
// to Overlay is in the overlay beside the runtime's, mapped to its text,
// and a path that is not absolute is refused.
func TestOverlaySwapsInExtraFiles(t *testing.T) {
	goroot, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Skipf("go env GOROOT: %v", err)
	}
	root := strings.TrimSpace(string(goroot))
	src := filepath.Join(t.TempDir(), "cmd", "prog", "impls.go")
	path, err := Overlay(root, t.TempDir(), map[string]string{src: "package main\n"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var o struct{ Replace map[string]string }
	if err := json.Unmarshal(b, &o); err != nil {
		t.Fatal(err)
	}
	if len(o.Replace) != len(Patched())+1 {
		t.Errorf("the overlay swaps %d files, want the %d of the runtime and the extra one: %v", len(o.Replace), len(Patched()), o.Replace)
	}
	if text, err := os.ReadFile(o.Replace[src]); err != nil || string(text) != "package main\n" {
		t.Errorf("the overlay maps %s to %q (%v), want the file with its text", src, o.Replace[src], err)
	}
	if _, err := Overlay(root, t.TempDir(), map[string]string{"impls.go": ""}); err == nil {
		t.Error("a relative path was taken into the overlay")
	}
}
