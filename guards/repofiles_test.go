package guards

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/locktest/locktest/runstore"
)

// repoFiles returns the files of the repository at root that the docs
// tests read, as slash-separated paths relative to root: what git tracks
// there and what it would add (untracked files that .gitignore does not
// name), when root is the top of a git work tree; otherwise the regular
// files under root, without dot folders and without what root's
// .gitignore names. It never returns a link or a folder, so a run store
// that `make demo` left in the checkout (its `latest` links, its run
// folders) is never read.
func repoFiles(root string) ([]string, error) {
	if files, ok := gitFiles(root); ok {
		return files, nil
	}
	ignored := gitignorePatterns(root)
	var out []string
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "." {
			return nil
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if strings.HasPrefix(d.Name(), ".") || matchesIgnore(ignored, rel, true) {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Type().IsRegular() && !matchesIgnore(ignored, rel, false) {
			out = append(out, rel)
		}
		return nil
	})
	return out, err
}

// gitFiles lists root's files through git, and says false when root is not
// the top of a git work tree (or git is missing).
func gitFiles(root string) ([]string, bool) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, false
	}
	top, err := exec.Command("git", "-C", abs, "rev-parse", "--show-toplevel").Output()
	if err != nil {
		return nil, false
	}
	if t, err := filepath.EvalSymlinks(strings.TrimSpace(string(top))); err != nil {
		return nil, false
	} else if a, err := filepath.EvalSymlinks(abs); err != nil || a != t {
		return nil, false
	}
	b, err := exec.Command("git", "-C", abs, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		return nil, false
	}
	var out []string
	for _, f := range bytes.Split(b, []byte{0}) {
		if len(f) == 0 {
			continue
		}
		rel := string(f)
		if fi, err := os.Lstat(filepath.Join(abs, rel)); err != nil || !fi.Mode().IsRegular() {
			continue // deleted in the work tree, or a link
		}
		if !slices.Contains(out, rel) {
			out = append(out, rel)
		}
	}
	return out, true
}

// gitignorePatterns reads the patterns of root's .gitignore (none when it
// has none).
func gitignorePatterns(root string) []string {
	b, err := os.ReadFile(filepath.Join(root, ".gitignore"))
	if err != nil {
		return nil
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") && !strings.HasPrefix(l, "!") {
			out = append(out, l)
		}
	}
	return out
}

// matchesIgnore reports whether the slash-separated path rel matches one of
// the .gitignore patterns: a pattern ending in / names folders only, a
// pattern with a leading or inner / is anchored at the root, any other
// matches the last element at any depth.
func matchesIgnore(patterns []string, rel string, dir bool) bool {
	for _, p := range patterns {
		dirOnly := strings.HasSuffix(p, "/")
		p = strings.TrimSuffix(p, "/")
		if dirOnly && !dir {
			continue
		}
		if strings.Contains(p, "/") {
			if ok, _ := filepath.Match(strings.TrimPrefix(p, "/"), rel); ok {
				return true
			}
			continue
		}
		if ok, _ := filepath.Match(p, filepath.Base(rel)); ok {
			return true
		}
	}
	return false
}

// TestRepoFilesSkipsTheStoreADemoLeft builds, in a temporary copy of the
// repository's layout, what `make demo` leaves in a checkout (a store with
// run folders and `latest` links, a bin/ folder, a stray link) and checks
// that the files the docs tests walk are the repository's own, both in a
// git work tree and in a plain folder, and that the citation check passes
// there although the store's files name machine paths.
func TestRepoFilesSkipsTheStoreADemoLeft(t *testing.T) {
	for _, withGit := range []bool{false, true} {
		name := "plain folder"
		if withGit {
			name = "git work tree"
		}
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			write := func(rel, text string) {
				t.Helper()
				p := filepath.Join(root, rel)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			gi, err := os.ReadFile(filepath.Join(repoRoot, ".gitignore"))
			if err != nil {
				t.Fatal(err)
			}
			write(".gitignore", string(gi))
			write("README.md", "# a tool\n")
			write("docs/guide.md", "see `docs/other.md`\n")
			write("cmd/locktest/main.go", "package main\n")
			// What a demo leaves: runs in the store, each with a latest link,
			// whose files name the machine's paths; a binary in bin/.
			store := filepath.Join(root, "store")
			for _, run := range []string{"redis-set-nx-px-pause-client-none", "redis-set-nx-px-pause-client-fenced"} {
				dir, err := runstore.MakeRunDir(store, run, time.Date(2026, 11, 22, 1, 43, 11, 0, time.UTC))
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, runstore.ResultsFile), []byte(`{"dir":"`+"/"+"root/x"+`"}`), 0o644); err != nil {
					t.Fatal(err)
				}
				if err := runstore.LinkLatest(dir); err != nil {
					t.Fatal(err)
				}
			}
			write("bin/locktest", "\x7fELF /"+"work/main\n")
			if err := os.Symlink("docs", filepath.Join(root, "docs-link")); err != nil {
				t.Fatal(err)
			}
			if withGit {
				for _, args := range [][]string{{"init", "-q"}, {"add", ".gitignore", "README.md", "docs", "cmd"}} {
					if out, err := exec.Command("git", append([]string{"-C", root}, args...)...).CombinedOutput(); err != nil {
						t.Skipf("git %s: %v: %s", args[0], err, out)
					}
				}
			}
			files, err := repoFiles(root)
			if err != nil {
				t.Fatal(err)
			}
			slices.Sort(files)
			want := []string{".gitignore", "README.md", "cmd/locktest/main.go", "docs/guide.md"}
			if !slices.Equal(files, want) {
				t.Errorf("repoFiles = %q, want %q", files, want)
			}
			cites, err := outsideCitations(root)
			if err != nil {
				t.Fatalf("the citation check of a checkout with a demo's store failed: %v", err)
			}
			if len(cites) != 0 {
				t.Errorf("citations found in the store or bin/: %q", cites)
			}
			// The check still finds a citation in a file of the repository.
			write("docs/guide.md", "as in /"+"work/main/x\n")
			if cites, err := outsideCitations(root); err != nil || len(cites) != 1 {
				t.Errorf("outsideCitations after a citation in docs/guide.md = %q, %v; want one", cites, err)
			}
		})
	}
}
