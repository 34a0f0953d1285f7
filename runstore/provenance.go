package runstore

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/locktest/locktest/internal/procfs"
)

// Version is locktest's own version as the binary's build info gives it:
// the module version, the VCS revision and "(modified)" for a build from
// a changed tree; "unknown" without build info.
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := bi.Main.Version
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" {
			v += " " + s.Value
		}
		if s.Key == "vcs.modified" && s.Value == "true" {
			v += " (modified)"
		}
	}
	return v
}

// Commit names the source a scoreboard or matrix was made from: `git
// describe --always --dirty` of the working directory, or, outside a
// repository, Version.
func Commit(ctx context.Context) string {
	out, err := exec.CommandContext(ctx, "git", "describe", "--always", "--dirty").Output()
	if err == nil {
		if s := strings.TrimSpace(string(out)); s != "" {
			return s
		}
	}
	return Version()
}

// Machine describes the host in one line for a header: cores, memory,
// kernel and OS, and a warning when not root (no network namespaces, so
// no partitions).
func Machine() string {
	parts := []string{fmt.Sprintf("%d cores", runtime.NumCPU())}
	if total, err := procfs.Meminfo("MemTotal"); err == nil {
		parts = append(parts, fmt.Sprintf("%.1f GiB memory", float64(total)/(1<<30)))
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		parts = append(parts, "Linux "+strings.TrimSpace(string(b)))
	}
	if b, err := os.ReadFile("/etc/os-release"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "PRETTY_NAME="); ok {
				parts = append(parts, strings.Trim(v, `"`))
			}
		}
	}
	if os.Geteuid() != 0 {
		parts = append(parts, "not root (no network namespaces: partitions are unavailable)")
	}
	return strings.Join(parts, ", ")
}
