package guards

// The help, the registries and the docs must agree: these tests read the
// flags of every command, the registries of impls, faults, resource modes,
// fault classes, providers, backends and scenarios, and README.md and
// docs/*.md, and fail when one of them names what the others do not have.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/clusters/backend"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/impls"
	"github.com/locktest/locktest/internal/cliflags"
	"github.com/locktest/locktest/matrix"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/run"
	"github.com/locktest/locktest/scenarios"
	"github.com/locktest/locktest/workloads"
)

// doc is one Markdown file of the documentation.
type doc struct{ path, text string }

// readDocs returns README.md and docs/*.md.
func readDocs(t *testing.T) []doc {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	paths = append([]string{filepath.Join(repoRoot, "README.md")}, paths...)
	var out []doc
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(repoRoot, p)
		out = append(out, doc{rel, string(b)})
	}
	if len(out) < 5 {
		t.Fatalf("found only %d docs", len(out))
	}
	return out
}

// codeSpans returns the code of a Markdown text: each line of a fenced
// block, and each inline code span, with the 1-based line it is on.
func codeSpans(md string) []span {
	var out []span
	fenced := false
	inline := regexp.MustCompile("`([^`\n]+)`")
	for i, l := range strings.Split(md, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			out = append(out, span{i + 1, l, false})
			continue
		}
		for _, m := range inline.FindAllStringSubmatch(l, -1) {
			out = append(out, span{i + 1, m[1], true})
		}
	}
	return out
}

type span struct {
	line int
	text string
	// inline is a code span in the text, not a line of a fenced block.
	inline bool
}

// flag is one flag of a command, as `locktest flags` prints it.
type flag = cliflags.Flag

var (
	commandsOnce sync.Once
	commandFlags map[string][]flag
	commandsErr  error
)

// commands returns every command of the CLI by its path ("run",
// "images build"; "" for locktest itself), hidden ones aside, with its
// flags, --help aside: what `locktest flags` prints.
func commands() map[string][]flag {
	commandsOnce.Do(func() {
		out, err := exec.Command(bin, "flags").Output()
		if err == nil {
			err = json.Unmarshal(out, &commandFlags)
		}
		commandsErr = err
	})
	if commandsErr != nil || len(commandFlags) < 10 {
		panic(fmt.Sprintf("locktest flags: %v, %d commands", commandsErr, len(commandFlags)))
	}
	return commandFlags
}

// flagsOf returns the flags of a command.
func flagsOf(c []flag) []flag { return c }

// lookup finds the flag of fs named name, or with that shorthand.
func lookup(fs []flag, name string) *flag {
	for i, f := range fs {
		if f.Name == name || (f.Shorthand != "" && f.Shorthand == name) {
			return &fs[i]
		}
	}
	return nil
}

// foreignFlags are flags the docs quote of programs other than locktest.
var foreignFlags = map[string]string{
	"--sentinel": "redis-server",
	"--cluster":  "redis-cli", "--noflush": "iptables-restore", "--cluster-replicas": "redis-cli", "--cluster-yes": "redis-cli",
	"--auth": "mariadb-install-db", "--auth-root-authentication-method": "mariadb-install-db", "--init-file": "mariadbd",
	"--no-defaults": "mariadbd", "--locale": "initdb", "--no-sync": "initdb",
	"--clear-groups": "setpriv", "--regid": "setpriv", "--reuid": "setpriv",
	"--case": "scripts/soak", "--no-cleanup": "scripts/soak", "--max-ms": "scripts/soak", "--providers": "scripts/soak", "--build": "clients/curator/run.sh",
	"--election-timeout": "etcd", "--heartbeat-interval": "etcd", "--initial-cluster": "etcd",
	"--path":     "iptables (the cgroup match)",
	"--cert-dir": "kube-apiserver", "--endpoint-reconciler-type": "kube-apiserver",
}

var flagRE = regexp.MustCompile(`(?:^|[^A-Za-z0-9_-])(--[a-z][a-z0-9-]*)`)

// TestDocsNameOnlyRealFlags fails when a doc names a flag that no locktest
// command has (a removed or misspelt flag), unless the doc quotes another
// program's flag listed in foreignFlags.
func TestDocsNameOnlyRealFlags(t *testing.T) {
	known := map[string]bool{"--help": true}
	for _, c := range commands() {
		for _, f := range flagsOf(c) {
			known["--"+f.Name] = true
		}
	}
	for flag, prog := range foreignFlags {
		if known[flag] {
			t.Errorf("foreignFlags lists %s (of %s), which is a locktest flag: remove it from the list", flag, prog)
		}
	}
	used := map[string]bool{}
	for _, d := range readDocs(t) {
		for i, l := range strings.Split(d.text, "\n") {
			for _, m := range flagRE.FindAllStringSubmatch(l, -1) {
				f := m[1]
				used[f] = true
				if !known[f] && foreignFlags[f] == "" {
					t.Errorf("%s:%d names %s, which no locktest command has", d.path, i+1, f)
				}
			}
		}
	}
	for f := range foreignFlags {
		if !used[f] {
			t.Errorf("foreignFlags lists %s, which no doc names any more: remove it", f)
		}
	}
}

// undocumented are flags the docs need not name, each with the reason.
var undocumented = map[string]string{}

// TestEveryFlagIsDocumented fails when a command has a flag that no doc
// names (by --name, or -x for a one-letter shorthand).
func TestEveryFlagIsDocumented(t *testing.T) {
	var all strings.Builder
	for _, d := range readDocs(t) {
		all.WriteString(d.text)
	}
	text := all.String()
	for path, c := range commands() {
		for _, f := range flagsOf(c) {
			if _, ok := undocumented[path+" --"+f.Name]; ok {
				continue
			}
			long := regexp.MustCompile(`(^|[^A-Za-z0-9-])--` + regexp.QuoteMeta(f.Name) + `($|[^A-Za-z0-9-])`)
			short := f.Shorthand != "" && regexp.MustCompile("`[^`]*(^|[ `])-"+f.Shorthand+"($|[ =`])").MatchString(text)
			if !long.MatchString(text) && !short {
				t.Errorf("locktest %s --%s is in no doc (README.md, docs/*.md): document it", path, f.Name)
			}
		}
	}
}

// placeholder reports whether a command-line token of a doc stands for
// something (DIR, <point>, NAME, ...).
func placeholder(tok string) bool {
	return strings.ContainsAny(tok, "<>[]…") || strings.Contains(tok, "...") ||
		regexp.MustCompile(`(^|/)[A-Z]{3,}($|/)`).MatchString(tok) || strings.HasPrefix(tok, "$")
}

// shellWords splits a command line as sh would (quotes, backslashes aside),
// ending at a comment, a pipe, a list operator or a redirection.
func shellWords(s string) []string {
	var out []string
	var cur strings.Builder
	in := false
	var quote rune
	for _, r := range s {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
			continue
		case r == '\'' || r == '"':
			quote, in = r, true
			continue
		case r == ' ' || r == '\t':
			if in {
				out = append(out, cur.String())
				cur.Reset()
				in = false
			}
			continue
		case r == '#' && !in, r == '|', r == ';', r == '&', r == '>':
			if in {
				out = append(out, cur.String())
			}
			return out
		}
		cur.WriteRune(r)
		in = true
	}
	if in {
		out = append(out, cur.String())
	}
	return out
}

// commandRE finds a locktest command line at the start of a line of code:
// locktest, bin/locktest, /tmp/lt, sudo ... .
var commandRE = regexp.MustCompile(`^\s*(?:sudo\s+)?(?:\S*/)?(?:lt|locktest) ([a-z][a-z-]*.*)$`)

// docCommand is a locktest command line of a doc.
type docCommand struct {
	where string
	args  []string
	// mention is a command named in running text (`locktest check`,
	// `locktest debate --findings`): its arguments may be left out.
	mention bool
}

// docCommands returns the locktest command lines in the code of the docs.
func docCommands(t *testing.T) []docCommand {
	var out []docCommand
	for _, d := range readDocs(t) {
		for _, s := range codeSpans(d.text) {
			m := commandRE.FindStringSubmatch(s.text)
			if m == nil {
				continue
			}
			out = append(out, docCommand{where: d.path + ":" + strconv.Itoa(s.line), args: shellWords(m[1]), mention: s.inline})
		}
	}
	if len(out) < 30 {
		t.Fatalf("found only %d locktest commands in the docs", len(out))
	}
	return out
}

// TestDocumentedCommandsAreValid parses every locktest command line the
// docs show with the command's own flags, and checks what it names: a run
// command must make a run that Validate accepts, a matrix command real
// impls and fault classes, a debate command real scenarios. The
// reproduction command of every built-in scenario is checked the same way.
// The command parses them (`locktest flags --check`), from the
// repository's root, as a reader runs them.
func TestDocumentedCommandsAreValid(t *testing.T) {
	cmds := docCommands(t)
	t.Chdir(repoRoot) // the commands of the docs run from the repository's root
	for _, s := range scenarios.Builtin() {
		a := shellWords(s.Command(1))
		cmds = append(cmds, docCommand{where: "scenario " + s.Name + "'s command", args: a[1:]})
	}
	all := commands()
	type line struct {
		dc   docCommand
		path string
		rest []string
	}
	var lines []line
	var in bytes.Buffer
	for _, dc := range cmds {
		path, rest := "", dc.args
		for len(rest) > 0 {
			p := strings.TrimSpace(path + " " + rest[0])
			if _, ok := all[p]; !ok {
				break
			}
			path, rest = p, rest[1:]
		}
		lines = append(lines, line{dc, path, rest})
		b, _ := json.Marshal(checked{Path: path, Args: rest})
		in.Write(append(b, '\n'))
	}
	c := exec.Command(bin, "flags", "--check")
	c.Stdin = &in
	out, err := c.Output()
	if err != nil {
		t.Fatalf("locktest flags --check: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	for _, l := range lines {
		var res checked
		if err := dec.Decode(&res); err != nil {
			t.Fatalf("locktest flags --check: %v", err)
		}
		t.Run(l.dc.where, func(t *testing.T) {
			checkCommand(t, l.dc, l.path, l.rest, res)
		})
	}
}

// checked is what `locktest flags --check` says of one command line.
type checked = cliflags.Line

func checkCommand(t *testing.T, dc docCommand, path string, rest []string, res checked) {
	if path == "" {
		if len(rest) > 0 && (rest[0] == "worker" || rest[0] == "node" || rest[0] == "flags") {
			return // the hidden commands locktest and its tests run
		}
		t.Fatalf("%q: no such locktest command", strings.Join(dc.args, " "))
	}
	if slices.ContainsFunc(rest, placeholder) || slices.Contains(rest, "--help") || slices.Contains(rest, "-h") {
		return
	}
	if res.ParseError != "" {
		// A mention may name a flag without its value.
		if !(dc.mention && strings.Contains(res.ParseError, "needs an argument")) {
			t.Fatalf("locktest %s %s: %v", path, strings.Join(rest, " "), res.ParseError)
		}
		return
	}
	if res.ArgsError != "" && !(dc.mention && len(rest) == 0) {
		t.Fatalf("locktest %s %s: %v", path, strings.Join(rest, " "), res.ArgsError)
	}
	switch path {
	case "margin":
		if dc.mention && len(rest) == 0 {
			return // the command named in a sentence
		}
		if res.Error != "" {
			t.Fatalf("locktest margin %s: %v", strings.Join(rest, " "), res.Error)
		}
	case "run":
		if res.Error != "" {
			t.Fatalf("locktest run %s: %v", strings.Join(rest, " "), res.Error)
		}
	case "matrix":
		if _, err := matrix.ParseClasses(res.Values["faults"]); err != nil {
			t.Errorf("--faults: %v", err)
		}
		for _, n := range res.Values["impl"] {
			if _, err := impls.Lookup(n); err != nil {
				t.Errorf("--impl: %v", err)
			}
		}
	case "debate":
		// --only selects among the --scenarios files' scenarios, when the
		// command names some, else among the built-in catalogue's.
		pool := scenarios.Builtin()
		if files := res.Values["scenarios"]; len(files) > 0 {
			pool = nil
			for _, f := range files {
				if _, err := os.Stat(f); errors.Is(err, fs.ErrNotExist) {
					return // a file of the reader's own (my.yaml)
				}
				ss, err := scenarios.Load(f)
				if err != nil {
					t.Fatalf("--scenarios: %v", err)
				}
				pool = append(pool, ss...)
			}
		}
		if _, err := scenarios.Select(pool, res.Values["only"]); err != nil {
			t.Errorf("--only: %v", err)
		}
	case "images build":
		for _, b := range res.Positional {
			if !slices.Contains(backend.All(), b) {
				t.Errorf("images build: no backend %q", b)
			}
		}
	}
}

// pausePoints are the worker's own pause points; impls add theirs.
var pausePoints = []string{workloads.PointAfterAcquire, workloads.PointBeforeWrite}

// logLevels are the values of --log-level: slog's levels.
func logLevels() []string {
	var out []string
	for _, l := range []slog.Level{slog.LevelDebug, slog.LevelInfo, slog.LevelWarn, slog.LevelError} {
		out = append(out, strings.ToLower(l.String()))
	}
	return out
}

// derivedDefaults are the defaults the docs give for flags whose zero
// value means a derived setting.
var derivedDefaults = map[string]string{
	"pause": "2×ttl", "clock-bump": "2×ttl", "quiet": "on when stderr is not a terminal",
}

// normDefault makes a default as the docs write it ("2 s", "`none`",
// "100 ms") comparable with a flag's DefValue.
func normDefault(s string) string {
	s = strings.ToLower(strings.Trim(strings.TrimSpace(s), "`"))
	s = strings.ReplaceAll(s, " ", "")
	switch s {
	case "—", "-", "none", "[]", "", "0", "0s", "false", "off":
		return "zero"
	}
	return s
}

// flagDefault returns the default of a run flag as the docs should write
// it, normalised.
func flagDefault(f *flag) string {
	if d, ok := derivedDefaults[f.Name]; ok {
		return normDefault(d)
	}
	return normDefault(f.Default)
}

// TestDocsGiveTheRealDefaults compares every default the docs state for a
// flag of locktest run — in the settings table of the quick start, and in
// prose as "`--flag` ... (default X)" — with the flag's own default.
func TestDocsGiveTheRealDefaults(t *testing.T) {
	runFlags := commands()["run"]
	row := regexp.MustCompile("^\\| ((?:`-[a-z-]+`(?:, )?)+) \\| ([^|]+) \\|")
	prose := regexp.MustCompile("`(--[a-z-]+)`[^`.;]{0,30}?\\(default ([^),;]+)[),;]")
	checked := 0
	for _, d := range readDocs(t) {
		for i, l := range strings.Split(d.text, "\n") {
			where := d.path + ":" + strconv.Itoa(i+1)
			if m := row.FindStringSubmatch(l); m != nil {
				flags := strings.Split(m[1], ", ")
				defs := strings.Split(m[2], ", ")
				switch {
				case len(defs) == len(flags):
				case len(defs) == 1: // one default for every flag of the row
					for len(defs) < len(flags) {
						defs = append(defs, defs[0])
					}
				default:
					t.Errorf("%s: %d flags, %d defaults", where, len(flags), len(defs))
					continue
				}
				for k, fl := range flags {
					name := strings.TrimLeft(strings.Trim(fl, "`"), "-")
					f := lookup(runFlags, name)
					if f == nil {
						continue // a table of another command: TestDocsNameOnlyRealFlags checks the name
					}
					checked++
					if got, want := normDefault(defs[k]), flagDefault(f); got != want {
						t.Errorf("%s: --%s's default is %q in the docs, %q in the code", where, f.Name, strings.TrimSpace(defs[k]), f.Default)
					}
				}
			}
			for _, m := range prose.FindAllStringSubmatch(l, -1) {
				f := lookup(runFlags, strings.TrimPrefix(m[1], "--"))
				if f == nil {
					continue
				}
				checked++
				if got, want := normDefault(strings.TrimPrefix(m[2], "the ")), flagDefault(f); got != want && !strings.Contains(m[2], "free") {
					t.Errorf("%s: %s's default is %q in the docs, %q in the code", where, m[1], m[2], f.Default)
				}
			}
		}
	}
	if checked < 20 {
		t.Errorf("only %d defaults found in the docs: the patterns no longer match them", checked)
	}
}

// vocabulary returns every name the registries know, with what it is.
func vocabulary() map[string]string {
	v := map[string]string{}
	add := func(what string, names ...string) {
		for _, n := range names {
			v[n] = what
		}
	}
	for _, n := range impls.Names() {
		add("impl", n)
		i, _ := impls.Lookup(n)
		add("pause point", i.Points...)
	}
	add("fault", nemesis.Names()...)
	add("heal", history.HealOps()...)
	add("anomaly kind", checker.AnomalyKinds...)
	add("note kind", checker.NoteKinds...)
	for _, m := range workloads.Modes() {
		add("resource mode", string(m))
	}
	for _, c := range matrix.Classes {
		add("fault class", string(c))
	}
	add("pause point", pausePoints...)
	add("provider", run.Providers...)
	add("net mode", run.NetModes...)
	add("persistence", run.Persistences...)
	add("backend", backend.All()...)
	for _, b := range backend.All() {
		ps, _ := backend.Params(b)
		add("cluster param", ps...)
	}
	for _, s := range scenarios.Builtin() {
		add("scenario", s.Name)
	}
	// The scenarios of the repository's own scenario files beside the
	// catalogue (scenarios/nats.yaml, etcd-regrant.yaml), and by their
	// names those of a file that a full load cannot read from here
	// (bugs.yaml names client manifests, which a load resolves
	// from the repository's root).
	files, _ := filepath.Glob(filepath.Join(repoRoot, "scenarios", "*.yaml"))
	for _, f := range files {
		if ss, err := scenarios.Load(f); err == nil {
			for _, s := range ss {
				add("scenario", s.Name)
			}
		} else if b, err := os.ReadFile(f); err == nil {
			// The items after "scenarios:", not the sources' names.
			_, list, _ := strings.Cut(string(b), "\nscenarios:\n")
			for _, m := range regexp.MustCompile(`(?m)^  - name: (\S+)$`).FindAllStringSubmatch(list, -1) {
				add("scenario", m[1])
			}
		}
		// The public bugs of a bugs list (scenarios/bugs.yaml).
		if b, err := os.ReadFile(f); err == nil {
			if bugs, err := scenarios.ParseBugs(b, f); err == nil {
				for _, bug := range bugs {
					add("bug", bug.ID)
				}
			}
		}
	}
	for c := range commands() {
		add("command", c)
	}
	manifests, _ := filepath.Glob(filepath.Join(repoRoot, "clients", "*.yaml"))
	for _, m := range manifests {
		if filepath.Base(m) == "scenarios.yaml" {
			continue
		}
		add("client", strings.TrimSuffix(filepath.Base(m), ".yaml"))
	}
	// The scenarios of the real clients (whose manifests a full load
	// would resolve from the repository's root).
	if b, err := os.ReadFile(filepath.Join(repoRoot, "clients", "scenarios.yaml")); err == nil {
		for _, m := range regexp.MustCompile(`(?m)^  - name: (\S+)$`).FindAllStringSubmatch(string(b), -1) {
			add("scenario", m[1])
		}
	}
	return v
}

// otherNames are names in backticks that are not locktest's: programs and
// packages of the host, and example values.
var otherNames = map[string]string{
	"redis-server": "a program", "mariadb-install-db": "a program", "mariadb-server": "a Debian package", "etcd-server": "a Debian package",
	"libzookeeper-java": "a Debian package", "python3-redis": "a Debian package", "python3-kazoo": "a Debian package",
	"python3-tooz": "a Debian package", "python3-pymysql": "a Debian package", "python3-psycopg2": "a Debian package",
	"python3-etcd3": "a Debian package", "openjdk-17-jdk-headless": "a Debian package", "libcurator-recipes-java": "a Debian package",
	"libcurator-framework-java": "a Debian package", "libcurator-client-java": "a Debian package", "libjackson2-databind-java": "a Debian package", "bind-address": "a MariaDB setting", "skip-name-resolve": "a MariaDB setting",
	"p2-2s": "an example of a recorded clock-skew-client target", "between-set-and-expire": "an example of an external client's pause point",
}

// implFamily matches names that look like an impl's, a scenario's or a
// backend's: those must be in a registry, not merely somewhere in the code.
var implFamily = regexp.MustCompile(`^(redis|redlock|etcd|zk|mysql|pg|mariadb)(-|$)`)

var kebab = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)+$`)

// goLiterals returns every string literal of the non-test Go code of the
// repository.
func goLiterals(t *testing.T) map[string]bool {
	lit := regexp.MustCompile(`"([^"\\\n]*)"`)
	out := map[string]bool{}
	files, err := repoFiles(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if !strings.HasSuffix(f, ".go") || strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(repoRoot, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range lit.FindAllStringSubmatch(string(b), -1) {
			out[m[1]] = true
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestDocsNameOnlyRealThings fails when a doc puts in backticks, as a name
// of its own, a dash-joined word that locktest does not have: an impl,
// fault, resource mode, scenario, pause point or backend that was removed
// or misspelt. Names of the impl families must be in a registry; other
// names (impl settings, anomaly kinds, heal ops) must at least be a string
// of the code. (The names in documented command lines are checked by
// TestDocumentedCommandsAreValid.) It also fails when a registered name is
// in no doc.
func TestDocsNameOnlyRealThings(t *testing.T) {
	vocab, lits := vocabulary(), goLiterals(t)
	var all strings.Builder
	for _, d := range readDocs(t) {
		all.WriteString(d.text)
		for _, s := range codeSpans(d.text) {
			if !s.inline {
				continue
			}
			w := s.text
			if !kebab.MatchString(w) || vocab[w] != "" || otherNames[w] != "" {
				continue
			}
			if implFamily.MatchString(w) || !lits[w] {
				t.Errorf("%s:%d: `%s` is no impl, fault, resource mode, scenario, pause point, backend or other name of locktest", d.path, s.line, w)
			}
		}
	}
	text := all.String()
	// The words of every code span and block of the docs.
	words := map[string]bool{}
	for _, d := range readDocs(t) {
		for _, s := range codeSpans(d.text) {
			for _, w := range regexp.MustCompile(`[a-zA-Z0-9-]+`).FindAllString(s.text, -1) {
				words[w] = true
				// A numbered family may be documented as one pattern:
				// after-node-K.
				words[regexp.MustCompile(`-[A-Z]$`).ReplaceAllString(w, "-#")] = true
			}
		}
	}
	var missing []string
	for n, what := range vocab {
		if what == "command" || what == "backend" {
			continue
		}
		if !words[n] && !words[regexp.MustCompile(`-[0-9]+$`).ReplaceAllString(n, "-#")] {
			missing = append(missing, what+" "+n)
		}
	}
	sort.Strings(missing)
	for _, m := range missing {
		t.Errorf("the %s is in no doc (README.md, docs/*.md) in backticks: document it", m)
	}
	for n := range otherNames {
		if !strings.Contains(text, "`"+n+"`") {
			t.Errorf("otherNames lists %q, which no doc names any more: remove it", n)
		}
	}
}

// repoDirs are the top-level folders of the repository a doc may cite.
var repoDirs = regexp.MustCompile(`^(\.ci|checker|clusters|cmd|docs|history|impls|internal|matrix|nemesis|reports|run|scenarios|scripts|workloads)/`)

// TestDocsCiteRealFiles fails when a doc cites a file of the repository
// that is not there, a file outside the repository, or a file name of a
// run's folder or the store that the code never writes.
func TestDocsCiteRealFiles(t *testing.T) {
	lits := goLiterals(t)
	fileName := regexp.MustCompile(`^[A-Za-z0-9_.-]+\.(jsonl|json|html|md|png|go|yaml|log|xml|cfg|properties|jar|sock)$`)
	for _, d := range readDocs(t) {
		for _, s := range codeSpans(d.text) {
			for _, w := range strings.Fields(s.text) {
				w = strings.TrimRight(w, ".,;:)")
				where := d.path + ":" + strconv.Itoa(s.line)
				switch {
				case strings.HasPrefix(w, "/work") || strings.HasPrefix(w, "../"):
					t.Errorf("%s: `%s` is outside the repository", where, w)
				case repoDirs.MatchString(w) && !placeholder(w):
					if m, _ := filepath.Glob(filepath.Join(repoRoot, w)); len(m) == 0 {
						t.Errorf("%s: `%s` is not in the repository", where, w)
					}
				case fileName.MatchString(w):
					if !lits[w] && !literalEndsWith(lits, "/"+w) && !repoHas(w) && otherFiles[w] == "" {
						t.Errorf("%s: `%s` is neither a file of the repository nor a name the code writes", where, w)
					}
				}
			}
		}
	}
}

// otherFiles are file names the docs cite that are neither in the
// repository nor named whole by the code, with where they come from.
var otherFiles = map[string]string{"my.yaml": "an example of the user's scenario file", "debate.xml": "an example of --junit's file"}

// literalEndsWith reports whether a string of the code ends with suffix
// (a path whose last part a doc names).
func literalEndsWith(lits map[string]bool, suffix string) bool {
	for l := range lits {
		if strings.HasSuffix(l, suffix) {
			return true
		}
	}
	return false
}

// repoHas reports whether a file named name is somewhere in the repository.
func repoHas(name string) bool {
	files, _ := repoFiles(repoRoot)
	for _, f := range files {
		if path.Base(f) == name {
			return true
		}
	}
	return false
}

// TestMakeTargetsInDocsExist fails when a doc tells to run a make target
// that the Makefile does not have.
func TestMakeTargetsInDocsExist(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	targets := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^([a-z%-]+):`).FindAllStringSubmatch(string(b), -1) {
		targets[m[1]] = true
	}
	re := regexp.MustCompile(`(?:^|[\s(])make ([a-z][a-z-]*)`)
	for _, d := range readDocs(t) {
		for _, s := range codeSpans(d.text) {
			for _, m := range re.FindAllStringSubmatch(s.text, -1) {
				tg := m[1]
				ok := targets[tg]
				for p := range targets {
					if pre, found := strings.CutSuffix(p, "%"); found && strings.HasPrefix(tg, pre) {
						ok = true
					}
				}
				if !ok {
					t.Errorf("%s:%d: make %s: no such target in the Makefile", d.path, s.line, tg)
				}
			}
		}
	}
}

// TestHelpListsEveryRegisteredName fails when the help of a command or
// `locktest list` leaves out a registered impl, fault, resource mode, fault
// class, provider, network mode, persistence or backend, and when a
// default in the help reads wrong.
func TestHelpListsEveryRegisteredName(t *testing.T) {
	help := func(args ...string) string {
		stdout, stderr, code := cli.Run(t, nil, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
		return stdout + stderr
	}
	runHelp := help("run", "--help")
	want := map[string][]string{"impl": impls.Names(), "fault": nemesis.Names(), "provider": run.Providers,
		"net mode": run.NetModes, "persistence": run.Persistences, "clock direction": run.ClockDirections,
		"expectation": run.Expectations, "pause point": pausePoints, "log level": logLevels()}
	for _, m := range workloads.Modes() {
		want["resource mode"] = append(want["resource mode"], string(m))
	}
	for what, names := range want {
		for _, n := range names {
			if !strings.Contains(runHelp, n) {
				t.Errorf("run --help does not name the %s %s", what, n)
			}
		}
	}
	matrixHelp := help("matrix", "--help")
	for _, c := range matrix.Classes {
		if !strings.Contains(matrixHelp, string(c)) {
			t.Errorf("matrix --help does not name the fault class %s", c)
		}
	}
	if h := help("images", "build", "--help"); !strings.Contains(h, strings.Join(backend.All(), ", ")) {
		t.Errorf("images build --help does not name the backends %v", backend.All())
	}
	list := help("list")
	for what, names := range map[string][]string{"impl": impls.Names(), "fault": nemesis.Names(), "resource mode": want["resource mode"]} {
		for _, n := range names {
			if !regexp.MustCompile(`(?m)^  ` + regexp.QuoteMeta(n) + `( |$)`).MatchString(list) {
				t.Errorf("list does not name the %s %s", what, n)
			}
		}
	}
	for _, n := range impls.Names() {
		i, _ := impls.Lookup(n)
		for _, p := range i.Points {
			if !strings.Contains(list, p) {
				t.Errorf("list does not name %s's pause point %s", n, p)
			}
		}
	}
	for path := range commands() {
		h := help(append(strings.Fields(path), "--help")...)
		// A flag whose default depends on the machine says so in words;
		// pflag's own "(default true)" after it would contradict them.
		if regexp.MustCompile(`\(default [^)]*\) \(default `).MatchString(h) {
			t.Errorf("%s --help gives a flag two defaults:\n%s", path, h)
		}
	}
}

// outsideCitation matches what no comment or doc of the repository may
// name: the first plan's documents, which the repository does not hold, an
// issue of the tracker, or a path on a build machine. It is assembled from
// pieces so that this file does not match itself.
var outsideCitation = regexp.MustCompile(`\b(DESIGN|LOCKS)` + `\.md\b|\b[Ii]ssue` + ` #?[0-9]+\b|(^|[\s"'(=])(/work|/home|/root|/Users)` + `/`)

// TestNoOutsideCitations fails when a source file, doc, scenario or script
// of the repository cites a document outside it, an issue number or a
// machine path: the design lives in docs/architecture.md and docs/locks.md.
func TestNoOutsideCitations(t *testing.T) {
	cites, err := outsideCitations(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cites {
		t.Error(c)
	}
}

// outsideCitations returns, for each line of a source file, doc, scenario
// or script of the repository at root (repoFiles: what git tracks, never
// a run store) that cites something outside it, where and what.
func outsideCitations(root string) ([]string, error) {
	files, err := repoFiles(root)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, f := range files {
		if slices.Contains(strings.Split(f, "/"), "testdata") {
			continue
		}
		switch path.Ext(f) {
		case ".go", ".md", ".yaml", ".yml", ".sh", "":
		default:
			continue
		}
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			return nil, err
		}
		for i, l := range strings.Split(string(b), "\n") {
			if m := outsideCitation.FindString(l); m != "" {
				out = append(out, fmt.Sprintf("%s:%d cites %q, which is outside the repository: cite docs/ instead", f, i+1, strings.TrimSpace(m)))
			}
		}
	}
	return out, nil
}
