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
// the module version, then the VCS revision (12 digits) unless the version
// already names it (a pseudo-version does), and "(modified)" for a build
// from a changed tree unless the version says "+dirty"; "unknown" without
// build info.
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	return versionOf(bi.Main.Version, bi.Settings)
}

// versionOf is Version of a main module's version and build settings.
func versionOf(v string, settings []debug.BuildSetting) string {
	for _, s := range settings {
		switch {
		case s.Key == "vcs.revision":
			rev := s.Value[:min(12, len(s.Value))]
			if !strings.Contains(v, rev) {
				v += " " + rev
			}
		case s.Key == "vcs.modified" && s.Value == "true" && !strings.Contains(v, "+dirty"):
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

// LibraryVersions returns the version of each Go module of paths (module
// paths, as an impl's Libraries name them) as this binary's build info
// records it. Workers are processes of the same binary as the driver, so
// these are the versions the workers' clients ran. A module that the
// binary does not contain, or a binary without build info, maps to
// "unknown: " and why; so does every module under `go test` of a package
// other than main, whose test binary's build info lists no modules.
func LibraryVersions(paths []string) map[string]string {
	bi, _ := debug.ReadBuildInfo() // nil without build info
	return libraryVersions(bi, paths)
}

// LibraryVersionsIn is LibraryVersions on the build info of another
// program (debug/buildinfo.ReadFile), such as an adapter built with other
// versions of a Go impl's libraries.
func LibraryVersionsIn(bi *debug.BuildInfo, paths []string) map[string]string {
	return libraryVersions(bi, paths)
}

// libraryVersions is LibraryVersions on the build info bi (nil: none). A
// module replaced by another version gives that version; one replaced by
// another module gives its version and names it; one replaced by a
// directory (no version) says so.
func libraryVersions(bi *debug.BuildInfo, paths []string) map[string]string {
	if len(paths) == 0 {
		return nil
	}
	out := make(map[string]string, len(paths))
	for _, p := range paths {
		out[p] = "unknown: the binary has no build info"
		if bi == nil {
			continue
		}
		out[p] = "unknown: the binary's build info does not list this module"
		if len(bi.Deps) == 0 {
			// Not even the libraries the impls import: the build info of
			// a test binary of a package other than main, which lists no
			// modules.
			out[p] = "unknown: the binary's build info lists no modules (as a go test binary's does not)"
		}
		if p == bi.Main.Path {
			out[p] = bi.Main.Version
			continue
		}
		for _, d := range bi.Deps {
			if d.Path != p {
				continue
			}
			switch r := d.Replace; {
			case r == nil:
				out[p] = d.Version
			case r.Version == "":
				out[p] = "unknown: replaced by the directory " + r.Path
			case r.Path != p:
				out[p] = r.Version + " (replaced by " + r.Path + ")"
			default:
				out[p] = r.Version
			}
			break
		}
	}
	return out
}
