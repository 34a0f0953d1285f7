package guards

// docs/ci.md prints a GitHub Actions workflow and Kubernetes Jobs that fan
// a debate out over shards and merge them. These tests read them out of the
// doc, check their shape (the manifests strictly, as Kubernetes' own
// types), and run their scripts here as the runner or the pod would, with
// the real binary on a tiny scenario and with stand-ins that exit with each
// code, so that the gating the doc describes is the gating it prints.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	k8syaml "sigs.k8s.io/yaml"

	"github.com/locktest/locktest/reports"
	"github.com/locktest/locktest/runstore"
	"github.com/locktest/locktest/testkit/gate"
)

// ciDocPath is the doc the tests read, from the repository's root.
const ciDocPath = "docs/ci.md"

// ciScenario is the tiny scenario the doc's debates run in the tests
// instead of the catalogue: one fenced single-node Redis lock, no fault,
// one second. With one seed it is a safe scenario "not refuted" (exit 3).
const ciScenario = `scenarios:
  - name: ci-smoke
    claim: 1
    title: a fenced single-node Redis lock without faults
    source: docs/ci.md, as guards/ci_test.go runs it
    predictions: {ci: safe — nothing goes wrong}
    expect: safe
    impl: redis-set-nx-px
    resource: fenced
    clients: 2
    time: 1s
`

// mdBlock is a fenced code block of a Markdown text.
type mdBlock struct {
	// line is the 1-based line of its opening fence.
	line int
	text string
}

// fencedBlocks returns the fenced blocks of md whose info string is lang,
// in order.
func fencedBlocks(md, lang string) []mdBlock {
	var out []mdBlock
	var cur *mdBlock
	for i, l := range strings.Split(md, "\n") {
		fence := strings.HasPrefix(strings.TrimSpace(l), "```")
		switch {
		case cur == nil && fence:
			if strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "```")) == lang {
				cur = &mdBlock{line: i + 1}
			} else {
				cur = &mdBlock{line: -1} // another language: skipped
			}
		case cur != nil && fence:
			if cur.line > 0 {
				out = append(out, *cur)
			}
			cur = nil
		case cur != nil:
			cur.text += l + "\n"
		}
	}
	return out
}

// readCIDoc returns the yaml blocks of docs/ci.md.
func readCIDoc(t *testing.T) []mdBlock {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, ciDocPath))
	if err != nil {
		t.Fatal(err)
	}
	blocks := fencedBlocks(string(b), "yaml")
	if len(blocks) < 2 {
		t.Fatalf("%s has %d yaml blocks; want the workflow first and the Kubernetes Job second", ciDocPath, len(blocks))
	}
	return blocks
}

// ciTools makes the programs the doc's scripts call, in a folder the
// scripts find first on PATH: sudo, which runs its command as it is (the
// tests run as the user they run as), and locktest, the image's binary.
// It returns that folder and the stand-in for the bin/locktest that make
// build leaves in a runner's workspace. The locktest stand-ins run the
// real binary, a debate cut to one seed of ciScenario, or, when
// CI_STUB_EXIT is set, exit with it at once; each logs
// "<exit code> <args>" to $CI_LOG.
func ciTools(t *testing.T, dir string) (pathDir, wrapper string) {
	t.Helper()
	scen := filepath.Join(dir, "ci-smoke.yaml")
	if err := os.WriteFile(scen, []byte(ciScenario), 0o644); err != nil {
		t.Fatal(err)
	}
	wrapper = filepath.Join(dir, "locktest-wrapper")
	script := fmt.Sprintf(`#!/bin/sh
# The tests' locktest: the real binary on a tiny debate, or a stub.
if [ -n "$CI_STUB_EXIT" ]; then echo "$CI_STUB_EXIT $*" >> "$CI_LOG"; exit "$CI_STUB_EXIT"; fi
if [ "$1" = debate ]; then set -- "$@" --seeds 1 --scenarios %s; fi
%s "$@"
rc=$?
echo "$rc $*" >> "$CI_LOG"
exit $rc
`, shQuote(scen), shQuote(bin))
	pathDir = filepath.Join(dir, "path")
	if err := os.MkdirAll(pathDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{
		wrapper:                            script,
		filepath.Join(pathDir, "locktest"): script,
		filepath.Join(pathDir, "sudo"):     "#!/bin/sh\nexec \"$@\"\n",
	} {
		if err := os.WriteFile(name, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return pathDir, wrapper
}

// shQuote quotes s for sh.
func shQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// ciLog is what the locktest stand-ins logged: one exit code and command
// line per call.
type ciLog struct{ path string }

// calls returns the logged calls whose arguments start with sub.
func (l ciLog) calls(t *testing.T, sub string) []ciCall {
	t.Helper()
	b, err := os.ReadFile(l.path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var out []ciCall
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		code, args, ok := strings.Cut(line, " ")
		if !ok || !strings.HasPrefix(args, sub+" ") {
			continue
		}
		c, err := strconv.Atoi(code)
		if err != nil {
			t.Fatalf("%s: bad line %q", l.path, line)
		}
		out = append(out, ciCall{c, args})
	}
	return out
}

type ciCall struct {
	code int
	args string
}

// runScript runs a shell script in dir with env added to the tests'
// environment, and returns its exit code and its output.
func runScript(t *testing.T, dir string, env []string, argv ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, out.String()
	case errors.As(err, &ee):
		return ee.ExitCode(), out.String()
	}
	t.Fatalf("%v: %v", argv, err)
	return -1, ""
}

// The GitHub Actions workflow.

// ghWorkflow is the part of a workflow file the test reads.
type ghWorkflow struct {
	Defaults struct {
		Run struct {
			Shell string `yaml:"shell"`
		} `yaml:"run"`
	} `yaml:"defaults"`
	Jobs map[string]*ghJob `yaml:"jobs"`
}

type ghJob struct {
	Needs    strList `yaml:"needs"`
	RunsOn   string  `yaml:"runs-on"`
	Strategy struct {
		FailFast *bool          `yaml:"fail-fast"`
		Matrix   map[string]any `yaml:"matrix"`
	} `yaml:"strategy"`
	Steps []ghStep `yaml:"steps"`
}

type ghStep struct {
	Name  string            `yaml:"name"`
	Uses  string            `yaml:"uses"`
	Run   string            `yaml:"run"`
	If    string            `yaml:"if"`
	Shell string            `yaml:"shell"`
	With  map[string]string `yaml:"with"`
	Env   map[string]string `yaml:"env"`
}

// strList is a YAML value that is one string or a list of them, as a
// job's needs.
type strList []string

func (s *strList) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*s = strList{n.Value}
		return nil
	}
	var l []string
	if err := n.Decode(&l); err != nil {
		return err
	}
	*s = l
	return nil
}

var (
	ghExpr      = regexp.MustCompile(`\$\{\{\s*([^}]*?)\s*\}\}`)
	ghShardFlag = regexp.MustCompile(`--shard[ =]\$\{\{ *matrix\.shard *\}\}/([0-9]+)\b`)
)

// ghSubst replaces the ${{ matrix.shard }} expressions of s by shard; any
// other expression fails the test, which cannot evaluate it.
func ghSubst(t *testing.T, s string, shard int) string {
	t.Helper()
	return ghExpr.ReplaceAllStringFunc(s, func(m string) string {
		e := ghExpr.FindStringSubmatch(m)[1]
		if e != "matrix.shard" || shard == 0 {
			t.Fatalf("the workflow's expression %s is one this test cannot evaluate", m)
		}
		return strconv.Itoa(shard)
	})
}

// shardMatrix returns the values of the job's matrix.shard.
func shardMatrix(j *ghJob) []int {
	l, _ := j.Strategy.Matrix["shard"].([]any)
	var out []int
	for _, v := range l {
		n, ok := v.(int)
		if !ok {
			return nil
		}
		out = append(out, n)
	}
	return out
}

// ghRunner runs the jobs of a workflow here: each job in a workspace of
// its own, its run steps as the runner's shell runs them, its uploads and
// downloads of artifacts as copies through one folder.
type ghRunner struct {
	t         *testing.T
	wf        *ghWorkflow
	root      string // the workspaces and artifacts
	path, bin string // ciTools
	log       ciLog
	artifacts map[string]string // name → folder
	// downloaded are the folders, relative to the workspace, that
	// download steps extracted artifacts into, in the order of their
	// names.
	downloaded []string
	// matched counts the files each upload path pattern matched, over
	// every job.
	matched map[string]int
}

// ghStepResult is the outcome of one step.
type ghStepResult struct {
	step   ghStep
	ran    bool
	code   int
	output string
}

// shellArgv is how the runner starts a run step's script.
func (r *ghRunner) shellArgv(s ghStep) []string {
	sh := s.Shell
	if sh == "" {
		sh = r.wf.Defaults.Run.Shell
	}
	switch sh {
	case "":
		return []string{"bash", "-e"}
	case "bash":
		return []string{"bash", "--noprofile", "--norc", "-eo", "pipefail"}
	case "sh":
		return []string{"sh", "-e"}
	}
	r.t.Fatalf("the workflow's shell %q is one this test cannot run", sh)
	return nil
}

// runJob runs job id as matrix shard (0: no matrix) in workspace ws, and
// returns each step's outcome and whether the job failed.
func (r *ghRunner) runJob(id string, shard int, ws string, env []string) ([]ghStepResult, bool) {
	t := r.t
	t.Helper()
	if err := os.MkdirAll(filepath.Join(ws, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	// make build's product; make setup's servers are this machine's.
	if err := os.Symlink(r.bin, filepath.Join(ws, "bin", "locktest")); err != nil {
		t.Fatal(err)
	}
	summary := filepath.Join(r.root, fmt.Sprintf("summary-%s-%d.md", id, shard))
	env = append([]string{"PATH=" + r.path + string(os.PathListSeparator) + os.Getenv("PATH"),
		"CI_LOG=" + r.log.path, "GITHUB_STEP_SUMMARY=" + summary}, env...)
	failed := false
	var out []ghStepResult
	for _, s := range r.wf.Jobs[id].Steps {
		res := ghStepResult{step: s}
		switch cond := strings.TrimSpace(s.If); cond {
		case "", "success()":
			res.ran = !failed
		case "always()", "${{ always() }}":
			res.ran = true
		case "failure()", "${{ failure() }}":
			res.ran = failed
		default:
			t.Fatalf("job %s: step %q: if: %s is a condition this test cannot evaluate", id, s.Name, cond)
		}
		if res.ran {
			res.code, res.output = r.step(id, shard, ws, s, env)
			failed = failed || res.code != 0
		}
		out = append(out, res)
	}
	return out, failed
}

// step runs one step of job id and returns its exit code and output.
func (r *ghRunner) step(id string, shard int, ws string, s ghStep, env []string) (int, string) {
	t := r.t
	t.Helper()
	with := map[string]string{}
	for k, v := range s.With {
		with[k] = ghSubst(t, v, shard)
	}
	action, _, _ := strings.Cut(s.Uses, "@")
	switch {
	case s.Run != "" && regexp.MustCompile(`(^|\s)make\s`).MatchString(s.Run):
		return 0, "" // set-up and build: done by the test (make setup, make build)
	case s.Run != "":
		f, err := os.CreateTemp(r.root, "step-*.sh")
		if err == nil {
			_, err = f.WriteString(ghSubst(t, s.Run, shard))
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		script := f.Name()
		for k, v := range s.Env {
			env = append(env, k+"="+ghSubst(t, v, shard))
		}
		return runScript(t, ws, env, append(r.shellArgv(s), script)...)
	case action == "actions/checkout" || action == "actions/setup-go":
		return 0, ""
	case action == "actions/upload-artifact":
		return r.upload(ws, with), ""
	case action == "actions/download-artifact":
		return r.download(ws, with), ""
	}
	t.Fatalf("job %s: step %q uses %s, which this test cannot run", id, s.Name, s.Uses)
	return 0, ""
}

// upload copies the files of an upload-artifact step into the artifact,
// relative to the least common ancestor of its paths, as the action does.
func (r *ghRunner) upload(ws string, with map[string]string) int {
	t := r.t
	name := with["name"]
	if name == "" {
		name = "artifact"
	}
	if _, dup := r.artifacts[name]; dup {
		t.Errorf("two uploads name the artifact %q (upload-artifact refuses the second)", name)
		return 1
	}
	var patterns []string
	for _, p := range strings.Split(with["path"], "\n") {
		if p = strings.TrimSpace(p); p != "" {
			if strings.HasPrefix(p, "!") || strings.Contains(p, "**") {
				t.Fatalf("upload path %q: this test understands neither excludes nor **", p)
			}
			patterns = append(patterns, p)
		}
	}
	// The least common ancestor of the paths' parts before any wildcard.
	var root []string
	for i, p := range patterns {
		parts := strings.Split(path.Clean(p), "/")
		if k := slices.IndexFunc(parts, func(s string) bool { return strings.ContainsAny(s, "*?[") }); k >= 0 {
			parts = parts[:k]
		}
		if i == 0 {
			root = parts
			continue
		}
		n := 0
		for n < len(root) && n < len(parts) && root[n] == parts[n] {
			n++
		}
		root = root[:n]
	}
	dst := filepath.Join(r.root, "artifacts", name)
	found := 0
	for _, p := range patterns {
		matches, err := filepath.Glob(filepath.Join(ws, p))
		if err != nil {
			t.Fatalf("upload path %q: %v", p, err)
		}
		r.matched[p] += len(matches)
		for _, m := range matches {
			rel, _ := filepath.Rel(filepath.Join(ws, filepath.Join(root...)), m)
			if st, err := os.Stat(m); err == nil && st.IsDir() {
				if err := os.CopyFS(filepath.Join(dst, rel), os.DirFS(m)); err != nil {
					t.Fatal(err)
				}
				found++
				continue
			}
			copyFile(t, m, filepath.Join(dst, rel))
			found++
		}
	}
	if found == 0 {
		switch with["if-no-files-found"] {
		case "error":
			return 1
		}
		return 0
	}
	r.artifacts[name] = dst
	return 0
}

// download copies the artifacts a download-artifact step names into the
// workspace: each into a folder named after it, or all into path with
// merge-multiple, as the action does.
func (r *ghRunner) download(ws string, with map[string]string) int {
	t := r.t
	dst := filepath.Join(ws, with["path"])
	var names []string
	for n := range r.artifacts {
		if ok, _ := path.Match(with["pattern"], n); n == with["name"] || (with["name"] == "" && ok) {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return 1
	}
	slices.Sort(names)
	for _, n := range names {
		to := filepath.Join(dst, n)
		if with["merge-multiple"] == "true" || with["name"] != "" {
			to = dst
		}
		if err := os.CopyFS(to, os.DirFS(r.artifacts[n])); err != nil {
			t.Errorf("download-artifact of %s: %v", n, err)
			return 1
		}
		rel, _ := filepath.Rel(ws, to)
		r.downloaded = append(r.downloaded, rel)
	}
	return 0
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err == nil {
		err = os.MkdirAll(filepath.Dir(to), 0o755)
	}
	if err == nil {
		err = os.WriteFile(to, b, 0o644)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// stepRunning returns the index of the step of job whose run script calls
// locktest sub, or -1.
func stepRunning(j *ghJob, sub string) int {
	re := regexp.MustCompile(`(^|\s)(\S*/)?locktest ` + sub + `\b`)
	return slices.IndexFunc(j.Steps, func(s ghStep) bool { return re.MatchString(s.Run) })
}

// TestCIDocWorkflow checks the GitHub Actions workflow of docs/ci.md — a
// debate job over a matrix of N shards, each passing --shard
// ${{ matrix.shard }}/N, and a merge job that needs it — and then runs it
// here: every shard job in a workspace of its own, its debate with the
// real binary on a one-second scenario, its artifacts handed to the merge
// job as download-artifact would, and the real merge. The jobs must pass
// and fail as the doc says the gating does: a shard fails only on exit 2,
// the merge fails on 1 and 2 and warns on 3; the test also runs the two
// steps with a locktest that exits with each code, and the merge with a
// shard missing.
func TestCIDocWorkflow(t *testing.T) {
	blocks := readCIDoc(t)
	wfBlock := blocks[0]
	var wf ghWorkflow
	if err := yaml.Unmarshal([]byte(wfBlock.text), &wf); err != nil {
		t.Fatalf("%s:%d: the workflow is not YAML: %v", ciDocPath, wfBlock.line, err)
	}
	// The shard job runs locktest debate, the merge job locktest merge.
	var shardID, mergeID string
	for id, j := range wf.Jobs {
		if stepRunning(j, "debate") >= 0 {
			shardID = id
		}
		if stepRunning(j, "merge") >= 0 {
			mergeID = id
		}
	}
	if shardID == "" || mergeID == "" || shardID == mergeID {
		t.Fatalf("%s:%d: want a job that runs locktest debate and another that runs locktest merge, got %q and %q", ciDocPath, wfBlock.line, shardID, mergeID)
	}
	sj, mj := wf.Jobs[shardID], wf.Jobs[mergeID]
	shards := shardMatrix(sj)
	n := len(shards)
	if n < 2 {
		t.Fatalf("job %s: matrix.shard is %v, want a list 1, 2, …, N of integers, N ≥ 2", shardID, sj.Strategy.Matrix["shard"])
	}
	for i, s := range shards {
		if s != i+1 {
			t.Fatalf("job %s: matrix.shard is %v, want 1, 2, …, %d", shardID, shards, n)
		}
	}
	debate := sj.Steps[stepRunning(sj, "debate")]
	m := ghShardFlag.FindStringSubmatch(debate.Run)
	if m == nil {
		t.Fatalf("job %s: the debate step does not pass --shard ${{ matrix.shard }}/N:\n%s", shardID, debate.Run)
	}
	if m[1] != strconv.Itoa(n) {
		t.Errorf("job %s: the debate runs --shard ${{ matrix.shard }}/%s, but the matrix has %d shards", shardID, m[1], n)
	}
	if !regexp.MustCompile(`(^|\s)sudo\s+(\S*/)?locktest debate`).MatchString(debate.Run) {
		t.Errorf("job %s: the debate does not run as root (sudo): a runner's user cannot make network namespaces", shardID)
	}
	if !slices.Contains(mj.Needs, shardID) {
		t.Errorf("job %s needs %v, not the shard job %s: it would merge before the shards are done", mergeID, mj.Needs, shardID)
	}
	if sj.Strategy.FailFast == nil || *sj.Strategy.FailFast {
		t.Errorf("job %s: fail-fast is not false: one shard's failure would cancel the others and their uploads", shardID)
	}
	// Go as go.mod asks for it.
	gomod, err := os.ReadFile(filepath.Join(repoRoot, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	goMod := regexp.MustCompile(`(?m)^go ([0-9.]+)$`).FindSubmatch(gomod)
	if goMod == nil {
		t.Fatal("go.mod has no go line")
	}
	for id, j := range wf.Jobs {
		for _, s := range j.Steps {
			if strings.HasPrefix(s.Uses, "actions/setup-go@") {
				if v := s.With["go-version"]; v == "" || !strings.HasPrefix(string(goMod[1])+".", v+".") {
					t.Errorf("job %s: setup-go installs Go %q, go.mod asks for %s", id, v, goMod[1])
				}
			}
		}
	}
	// The uploads run even when the debate failed.
	uploads := 0
	for _, s := range sj.Steps {
		if strings.HasPrefix(s.Uses, "actions/upload-artifact@") {
			uploads++
			if !strings.Contains(s.If, "always()") {
				t.Errorf("job %s: the upload %q does not run when the debate failed (if: always())", shardID, s.Name)
			}
		}
	}
	if uploads == 0 {
		t.Errorf("job %s uploads nothing", shardID)
	}
	if t.Failed() {
		return
	}

	t.Run("run", func(t *testing.T) {
		gate.Need(t, "redis-server")
		dir := t.TempDir()
		pathDir, wrapper := ciTools(t, dir)
		r := &ghRunner{t: t, wf: &wf, root: dir, path: pathDir, bin: wrapper, log: ciLog{filepath.Join(dir, "locktest.log")},
			artifacts: map[string]string{}, matched: map[string]int{}}
		for _, s := range shards {
			steps, failed := r.runJob(shardID, s, filepath.Join(dir, fmt.Sprintf("runner-%s-%d", shardID, s)), nil)
			if failed {
				for _, st := range steps {
					if st.code != 0 {
						t.Errorf("shard %d: step %q exited %d:\n%s", s, st.step.Name, st.code, st.output)
					}
				}
			}
		}
		calls := r.log.calls(t, "debate")
		if len(calls) != n {
			t.Fatalf("the shard jobs ran locktest debate %d times, want %d: %v", len(calls), n, calls)
		}
		for _, c := range calls {
			if c.code != 0 && c.code != 1 && c.code != 3 {
				t.Errorf("locktest %s: exit %d, want a verdict (0, 1 or 3)", c.args, c.code)
			}
		}
		if t.Failed() {
			return
		}
		mws := filepath.Join(dir, "runner-"+mergeID)
		steps, failed := r.runJob(mergeID, 0, mws, nil)
		merges := r.log.calls(t, "merge")
		if len(merges) != 1 {
			t.Fatalf("the merge job ran locktest merge %d times, want once; its steps: %+v", len(merges), steps)
		}
		code := merges[0].code
		mergeStep := steps[stepRunning(mj, "merge")]
		switch {
		case code == 2:
			t.Fatalf("locktest %s: exit 2 (usage or set-up):\n%s", merges[0].args, mergeStep.output)
		case failed != (code == 1):
			t.Errorf("locktest merge exited %d and the merge job failed: %v, want %v; its steps: %+v", code, failed, code == 1, steps)
		case code == 3 && !strings.Contains(mergeStep.output, "::warning::"):
			t.Errorf("locktest merge exited 3 and the merge step gave no warning:\n%s", mergeStep.output)
		}
		for p, k := range r.matched {
			if k == 0 {
				t.Errorf("the upload path %q matched nothing in any job's workspace", p)
			}
		}
		// The merged scoreboard holds the one run of shard 1.
		out := regexp.MustCompile(`--out[ =](\S+)`).FindStringSubmatch(mergeStep.step.Run)
		if out == nil {
			t.Fatalf("the merge step gives no --out:\n%s", mergeStep.step.Run)
		}
		var board reports.Scoreboard
		if err := runstore.ReadJSON(filepath.Join(mws, out[1], reports.ScoreboardJSONFile), &board); err != nil {
			t.Fatal(err)
		}
		if len(board.Rows) != 1 || board.Rows[0].Runs != 1 || board.Shard != "" {
			t.Errorf("merged scoreboard: %+v", board)
		}

		// The gating, for every exit code.
		debateIdx, mergeIdx := stepRunning(sj, "debate"), stepRunning(mj, "merge")
		for code := 0; code <= 3; code++ {
			ws := filepath.Join(dir, "stub-debate")
			if err := os.RemoveAll(ws); err != nil {
				t.Fatal(err)
			}
			got, output := runOneStep(t, r, shardID, 1, debateIdx, ws, code)
			if want := code == 2; (got != 0) != want {
				t.Errorf("the debate step with locktest exiting %d: step exit %d, want it to fail: %v\n%s", code, got, want, output)
			}
			ws = filepath.Join(dir, "stub-merge")
			if err := os.RemoveAll(ws); err != nil {
				t.Fatal(err)
			}
			copyWorkspace(t, mws, ws, "")
			got, output = runOneStep(t, r, mergeID, 0, mergeIdx, ws, code)
			if want := code == 1 || code == 2; (got != 0) != want {
				t.Errorf("the merge step with locktest exiting %d: step exit %d, want it to fail: %v\n%s", code, got, want, output)
			}
			if code == 3 && !strings.Contains(output, "::warning::") {
				t.Errorf("the merge step with locktest exiting 3 gave no warning:\n%s", output)
			}
		}
		// A shard missing: the merge step fails before it merges.
		if len(r.downloaded) != n {
			t.Fatalf("the merge job downloaded %d artifacts, want the %d shards': %v", len(r.downloaded), n, r.downloaded)
		}
		missing := r.downloaded[n-1]
		ws := filepath.Join(dir, "stub-missing")
		copyWorkspace(t, mws, ws, missing)
		before := len(r.log.calls(t, "merge"))
		if got, output := runOneStep(t, r, mergeID, 0, mergeIdx, ws, 0); got == 0 || len(r.log.calls(t, "merge")) != before {
			t.Errorf("the merge step with %s missing: step exit %d, locktest merge called %d times; want a failure before the merge:\n%s",
				missing, got, len(r.log.calls(t, "merge"))-before, output)
		}
	})
}

// copyWorkspace copies the workspace from into to, but for its bin folder
// and the entry named skip.
func copyWorkspace(t *testing.T, from, to, skip string) {
	t.Helper()
	ents, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.Name() == "bin" || e.Name() == skip {
			continue
		}
		if !e.IsDir() {
			copyFile(t, filepath.Join(from, e.Name()), filepath.Join(to, e.Name()))
			continue
		}
		if err := os.CopyFS(filepath.Join(to, e.Name()), os.DirFS(filepath.Join(from, e.Name()))); err != nil {
			t.Fatal(err)
		}
	}
}

// runOneStep runs step idx of job as matrix shard in workspace ws (which
// may hold what the step needs, but no bin folder) with a locktest that
// exits with code, and returns the step's exit code and output.
func runOneStep(t *testing.T, r *ghRunner, job string, shard, idx int, ws string, code int) (int, string) {
	t.Helper()
	one := *r.wf
	j := *r.wf.Jobs[job]
	j.Steps = []ghStep{j.Steps[idx]}
	one.Jobs = map[string]*ghJob{job: &j}
	rr := *r
	rr.wf = &one
	res, _ := rr.runJob(job, shard, ws, []string{"CI_STUB_EXIT=" + strconv.Itoa(code)})
	return res[0].code, res[0].output
}

// The Kubernetes Jobs.

// intOrUnset formats a Job's optional count.
func intOrUnset(p *int32) string {
	if p == nil {
		return "unset"
	}
	return strconv.Itoa(int(*p))
}

// k8sDoc is one document of a yaml block of the doc.
type k8sDoc struct {
	where string
	json  []byte
	kind  string
}

// kubeDocs returns the Kubernetes documents of the doc's yaml blocks from
// the second on (the first is the workflow), split at ---.
func kubeDocs(t *testing.T, blocks []mdBlock) []k8sDoc {
	t.Helper()
	var out []k8sDoc
	sep := regexp.MustCompile(`(?m)^---[ \t]*$`)
	for _, b := range blocks[1:] {
		for i, d := range sep.Split(b.text, -1) {
			if strings.TrimSpace(d) == "" {
				continue
			}
			where := fmt.Sprintf("%s:%d (document %d)", ciDocPath, b.line, i+1)
			j, err := k8syaml.YAMLToJSONStrict([]byte(d))
			if err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			var tm struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
			}
			if err := json.Unmarshal(j, &tm); err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			out = append(out, k8sDoc{where, j, tm.APIVersion + " " + tm.Kind})
		}
	}
	return out
}

// decodeStrictly decodes j into v, refusing a field v does not have, and
// then a key that encoding/json matched only case-insensitively (the API
// server would refuse it): every key of j must come back when v is
// encoded again.
func decodeStrictly(j []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	back, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var in, out any
	if err := json.Unmarshal(j, &in); err != nil {
		return err
	}
	if err := json.Unmarshal(back, &out); err != nil {
		return err
	}
	if lost := lostKeys(in, out, ""); len(lost) > 0 {
		return fmt.Errorf("fields %s are not the type's (misspelt case?)", strings.Join(lost, ", "))
	}
	return nil
}

// lostKeys returns the paths of the keys of in that out lacks.
func lostKeys(in, out any, at string) []string {
	var lost []string
	switch a := in.(type) {
	case map[string]any:
		b, _ := out.(map[string]any)
		for k, v := range a {
			w, ok := b[k]
			if !ok {
				lost = append(lost, at+"."+k)
				continue
			}
			lost = append(lost, lostKeys(v, w, at+"."+k)...)
		}
	case []any:
		b, _ := out.([]any)
		for i, v := range a {
			if i < len(b) {
				lost = append(lost, lostKeys(v, b[i], fmt.Sprintf("%s[%d]", at, i))...)
			}
		}
	}
	return lost
}

// kubeExpand expands $(NAME) in s as the kubelet expands a container's
// command and args: $$ is a $, $(NAME) the value of a variable vars
// defines, anything else stays as written (so the shell still sees
// $((...)) and ${...}).
func kubeExpand(s string, vars map[string]string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString("$(")
				i++
				continue
			}
			name := s[i+2 : i+2+end]
			if v, ok := vars[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString("$(" + name + ")")
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

// podScript returns the shell and the script a Job's one container runs
// (its command and args, expanded as the kubelet does for index), with
// every volume's mountPath replaced by a folder of root, the working
// folder, and the variables the container has in its environment.
func podScript(t *testing.T, where string, j *batchv1.Job, index int, root string) (shell, script, wd string, env []string) {
	t.Helper()
	c := j.Spec.Template.Spec.Containers[0]
	vars := map[string]string{}
	if j.Spec.CompletionMode != nil && *j.Spec.CompletionMode == batchv1.IndexedCompletion {
		vars["JOB_COMPLETION_INDEX"] = strconv.Itoa(index)
	}
	for _, e := range c.Env {
		vars[e.Name] = e.Value
	}
	for k, v := range vars {
		env = append(env, k+"="+v)
	}
	argv := slices.Concat(c.Command, c.Args)
	if len(argv) < 3 || !slices.Contains([]string{"sh", "/bin/sh", "bash", "/bin/bash"}, argv[0]) || argv[1] != "-c" {
		t.Fatalf("%s: the container runs %q; this test runs a shell's -c script", where, argv)
	}
	script = kubeExpand(argv[2], vars)
	wd = root
	for _, m := range c.VolumeMounts {
		to := filepath.Join(root, m.Name)
		script = strings.ReplaceAll(script, m.MountPath, to)
		if c.WorkingDir != "" && strings.HasPrefix(c.WorkingDir, m.MountPath) {
			wd = to + strings.TrimPrefix(c.WorkingDir, m.MountPath)
		}
	}
	if err := os.MkdirAll(wd, 0o755); err != nil {
		t.Fatal(err)
	}
	return argv[0], script, wd, env
}

var k8sShardFlag = regexp.MustCompile(`--shard[ =]"?\$\(\( *\$?JOB_COMPLETION_INDEX *\+ *1 *\)\)/([0-9]+)\b`)

// TestCIDocKubernetesJobDecodesStrictly decodes every Kubernetes document
// of docs/ci.md (the yaml blocks after the workflow, split at ---) strictly
// into its k8s.io/api type, so that a misspelt or unknown field fails; then
// it checks the Indexed Job of the debate — completions and parallelism N,
// a container that runs locktest debate --shard
// $((JOB_COMPLETION_INDEX+1))/N with the same N, privileged (or with
// NET_ADMIN and SYS_ADMIN) for the network namespaces — and the merge Job,
// which must mount the same claim. Then it runs both containers' scripts
// here, the debate's for every index with the real binary on a one-second
// scenario and the merge's after them, and with a locktest that exits with
// each code: a shard pod fails only on 2 (with 2, for podFailurePolicy),
// the merge on 1 and 2.
func TestCIDocKubernetesJobDecodesStrictly(t *testing.T) {
	blocks := readCIDoc(t)
	if !regexp.MustCompile(`(?m)^kind: *Job *$`).MatchString(blocks[1].text) {
		t.Fatalf("%s:%d: the second yaml block has no kind: Job", ciDocPath, blocks[1].line)
	}
	var debate, merge *batchv1.Job
	var debateAt, mergeAt string
	claims := map[string]bool{}
	for _, d := range kubeDocs(t, blocks) {
		switch d.kind {
		case "batch/v1 Job":
			var j batchv1.Job
			if err := decodeStrictly(d.json, &j); err != nil {
				t.Fatalf("%s: not a batch/v1 Job: %v", d.where, err)
			}
			if len(j.Spec.Template.Spec.Containers) != 1 {
				t.Fatalf("%s: %d containers, want one", d.where, len(j.Spec.Template.Spec.Containers))
			}
			c := j.Spec.Template.Spec.Containers[0]
			cmd := strings.Join(slices.Concat(c.Command, c.Args), " ")
			switch {
			case strings.Contains(cmd, "locktest debate"):
				if debate != nil {
					t.Fatalf("%s: a second debate Job (the first is at %s)", d.where, debateAt)
				}
				debate, debateAt = &j, d.where
			case strings.Contains(cmd, "locktest merge"):
				if merge != nil {
					t.Fatalf("%s: a second merge Job (the first is at %s)", d.where, mergeAt)
				}
				merge, mergeAt = &j, d.where
			default:
				t.Fatalf("%s: a Job that runs neither locktest debate nor locktest merge: %s", d.where, cmd)
			}
		case "v1 PersistentVolumeClaim":
			var pvc corev1.PersistentVolumeClaim
			if err := decodeStrictly(d.json, &pvc); err != nil {
				t.Fatalf("%s: not a v1 PersistentVolumeClaim: %v", d.where, err)
			}
			claims[pvc.Name] = true
		default:
			t.Fatalf("%s: apiVersion and kind %q: this test decodes batch/v1 Job and v1 PersistentVolumeClaim", d.where, d.kind)
		}
	}
	if debate == nil || merge == nil {
		t.Fatalf("%s: want a Job that runs locktest debate and one that runs locktest merge", ciDocPath)
	}
	if debateAt[:strings.Index(debateAt, " ")] != fmt.Sprintf("%s:%d", ciDocPath, blocks[1].line) {
		t.Errorf("the debate Job is at %s, not in the second yaml block", debateAt)
	}

	// The debate: an Indexed Job of N pods, each shard index+1 of N.
	s := debate.Spec
	if debate.APIVersion != "batch/v1" || debate.Kind != "Job" {
		t.Errorf("%s: %s %s, want batch/v1 Job", debateAt, debate.APIVersion, debate.Kind)
	}
	if s.CompletionMode == nil || *s.CompletionMode != batchv1.IndexedCompletion {
		t.Fatalf("%s: completionMode is not Indexed", debateAt)
	}
	if s.Completions == nil || s.Parallelism == nil || *s.Completions != *s.Parallelism || *s.Completions < 2 {
		t.Fatalf("%s: completions %s and parallelism %s, want the same N ≥ 2", debateAt, intOrUnset(s.Completions), intOrUnset(s.Parallelism))
	}
	n := int(*s.Completions)
	pod := s.Template.Spec
	c := pod.Containers[0]
	cmd := strings.Join(slices.Concat(c.Command, c.Args), " ")
	m := k8sShardFlag.FindStringSubmatch(cmd)
	switch {
	case m == nil:
		t.Errorf("%s: the container does not pass --shard $((JOB_COMPLETION_INDEX+1))/N: %s", debateAt, cmd)
	case m[1] != strconv.Itoa(n):
		t.Errorf("%s: the container runs --shard $((JOB_COMPLETION_INDEX+1))/%s, but completions is %d", debateAt, m[1], n)
	}
	if sc := c.SecurityContext; sc == nil || !(sc.Privileged != nil && *sc.Privileged ||
		sc.Capabilities != nil && slices.Contains(sc.Capabilities.Add, "NET_ADMIN") && slices.Contains(sc.Capabilities.Add, "SYS_ADMIN")) {
		t.Errorf("%s: the container is neither privileged nor given NET_ADMIN and SYS_ADMIN: it cannot make network namespaces", debateAt)
	}
	var failOn2 bool
	if p := s.PodFailurePolicy; p != nil {
		if pod.RestartPolicy != corev1.RestartPolicyNever {
			t.Errorf("%s: a podFailurePolicy needs restartPolicy Never, not %q", debateAt, pod.RestartPolicy)
		}
		for _, r := range p.Rules {
			if r.Action == batchv1.PodFailurePolicyActionFailJob && r.OnExitCodes != nil && slices.Contains(r.OnExitCodes.Values, 2) {
				failOn2 = true
				if r.OnExitCodes.ContainerName != nil && *r.OnExitCodes.ContainerName != c.Name {
					t.Errorf("%s: the podFailurePolicy names container %q, the pod's is %q", debateAt, *r.OnExitCodes.ContainerName, c.Name)
				}
			}
		}
	}
	// Both Jobs on one claim, declared in the doc if it declares any.
	claimOf := func(j *batchv1.Job, where string) string {
		cs := j.Spec.Template.Spec.Containers[0]
		for _, v := range j.Spec.Template.Spec.Volumes {
			if v.PersistentVolumeClaim != nil && slices.ContainsFunc(cs.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == v.Name }) {
				return v.PersistentVolumeClaim.ClaimName
			}
		}
		t.Errorf("%s: the container mounts no persistentVolumeClaim", where)
		return ""
	}
	dc, mc := claimOf(debate, debateAt), claimOf(merge, mergeAt)
	if dc != mc {
		t.Errorf("the debate Job writes to claim %q, the merge Job reads claim %q", dc, mc)
	}
	if len(claims) > 0 && !claims[dc] {
		t.Errorf("the Jobs mount claim %q; the doc declares %v", dc, claims)
	}
	// The merge: one pod.
	if merge.APIVersion != "batch/v1" || merge.Kind != "Job" {
		t.Errorf("%s: %s %s, want batch/v1 Job", mergeAt, merge.APIVersion, merge.Kind)
	}
	if ms := merge.Spec; ms.CompletionMode != nil && *ms.CompletionMode == batchv1.IndexedCompletion || ms.Completions != nil && *ms.Completions != 1 {
		t.Errorf("%s: the merge Job must be one pod", mergeAt)
	}
	if t.Failed() {
		return
	}

	t.Run("run", func(t *testing.T) {
		gate.Need(t, "redis-server")
		dir := t.TempDir()
		pathDir, _ := ciTools(t, dir)
		log := ciLog{filepath.Join(dir, "locktest.log")}
		env := []string{"PATH=" + pathDir + string(os.PathListSeparator) + os.Getenv("PATH"), "CI_LOG=" + log.path}
		vol := filepath.Join(dir, "volumes")
		pods := func(extra ...string) []int {
			var codes []int
			for i := range n {
				sh, script, wd, podEnv := podScript(t, debateAt, debate, i, vol)
				code, out := runScript(t, wd, slices.Concat(env, podEnv, extra), sh, "-c", script)
				if code != 0 && !slices.Contains(extra, "CI_STUB_EXIT=2") {
					t.Errorf("debate pod %d: exit %d\n%s", i, code, out)
				}
				codes = append(codes, code)
			}
			return codes
		}
		pods()
		calls := log.calls(t, "debate")
		if len(calls) != n {
			t.Fatalf("the debate pods ran locktest debate %d times, want %d: %v", len(calls), n, calls)
		}
		for i, c := range calls {
			if c.code != 0 && c.code != 1 && c.code != 3 {
				t.Errorf("pod %d: locktest %s: exit %d, want a verdict (0, 1 or 3)", i, c.args, c.code)
			}
			if want := fmt.Sprintf("--shard %d/%d ", i+1, n); !strings.Contains(c.args+" ", want) {
				t.Errorf("pod %d ran locktest %s, without %s", i, c.args, want)
			}
		}
		// The shards' folders: those the pods wrote a scoreboard into.
		boards, _ := filepath.Glob(filepath.Join(vol, "*", "*", reports.ScoreboardJSONFile))
		if len(boards) != n {
			t.Fatalf("the debate pods wrote %d scoreboards into the volume, want %d: %v", len(boards), n, boards)
		}
		sh, script, wd, mergeEnv := podScript(t, mergeAt, merge, 0, vol)
		env = append(env, mergeEnv...)
		code, out := runScript(t, wd, env, sh, "-c", script)
		merges := log.calls(t, "merge")
		switch {
		case len(merges) != 1:
			t.Fatalf("the merge pod ran locktest merge %d times, want once (exit %d):\n%s", len(merges), code, out)
		case merges[0].code == 2:
			t.Fatalf("locktest %s: exit 2 (usage or set-up):\n%s", merges[0].args, out)
		case (code != 0) != (merges[0].code == 1):
			t.Errorf("locktest merge exited %d and the merge pod %d:\n%s", merges[0].code, code, out)
		}
		// A shard missing: the merge pod fails before it merges.
		partial := filepath.Join(dir, "partial")
		for _, b := range boards[:n-1] {
			rel, _ := filepath.Rel(vol, filepath.Dir(b))
			if err := os.CopyFS(filepath.Join(partial, rel), os.DirFS(filepath.Dir(b))); err != nil {
				t.Fatal(err)
			}
		}
		before := len(log.calls(t, "merge"))
		psh, pscript, pwd, _ := podScript(t, mergeAt, merge, 0, partial)
		if code, out := runScript(t, pwd, env, psh, "-c", pscript); code == 0 || len(log.calls(t, "merge")) != before {
			t.Errorf("the merge pod with %s missing: exit %d, locktest merge called %d times; want a failure before the merge:\n%s",
				filepath.Dir(boards[n-1]), code, len(log.calls(t, "merge"))-before, out)
		}
		// The gating, for every exit code.
		for stub := 0; stub <= 3; stub++ {
			e := "CI_STUB_EXIT=" + strconv.Itoa(stub)
			for i, got := range pods(e) {
				want := 0
				if stub == 2 {
					want = 2
				}
				if got != want && (stub != 2 || got == 0 || failOn2) {
					t.Errorf("debate pod %d with locktest exiting %d: exit %d, want %d", i, stub, got, want)
				}
			}
			code, out := runScript(t, wd, append(env, e), sh, "-c", script)
			if want := stub == 1 || stub == 2; (code != 0) != want {
				t.Errorf("the merge pod with locktest exiting %d: exit %d, want it to fail: %v\n%s", stub, code, want, out)
			}
			if stub == 3 && !strings.Contains(strings.ToLower(out), "warning") {
				t.Errorf("the merge pod with locktest exiting 3 gave no warning:\n%s", out)
			}
		}
	})
}
