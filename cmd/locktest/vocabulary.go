package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/pflag"
)

// sharedFlag is what one flag name means in every command that has it.
// The flag walk (TestFlagVocabulary) holds the commands to it: a flag
// name that two commands share must be here, with the same type in each
// (a list where Lists says why), and with one default unless Defaults says
// why a command's differs. docs/cli.md is made from this table.
type sharedFlag struct {
	// Meaning is the one meaning, in one sentence.
	Meaning string
	// Lists names the commands whose flag takes a list where the others
	// take one value, with the reason.
	Lists map[string]string
	// Defaults names the commands whose default differs from the other
	// commands', with the reason.
	Defaults map[string]string
}

// vocabulary is every flag name that more than one command has. The run
// settings that margin shares with run (run.Settings) mean and default
// the same in both by construction, and are not repeated here unless a
// third command has them too.
var vocabulary = map[string]sharedFlag{
	"baseline": {Meaning: "a stored matrix.json to compare the matrix with: exit 1 when a cell got worse"},
	"budget": {Meaning: "the wall time after which a search starts no more runs (0: none)",
		Defaults: map[string]string{"shrink": "30 minutes: a shrink replays one failing run's schedule, which is short; a margin runs a grid of trials at every value before it bisects, so it gets an hour"}},
	"client": {Meaning: "an external lock client (a manifest in clients/, a manifest file or a command line) in place of an impl",
		Lists: map[string]string{"matrix": "a matrix measures several clients, each in rows of its own"}},
	"clients": {Meaning: "how many lock clients contend, each its own worker process"},
	"dir":     {Meaning: "the lab's folder: its inventory, key and known_hosts"},
	"faults": {Meaning: "the faults to inject, by the names locktest list gives",
		Lists: map[string]string{"matrix": "a matrix takes fault classes (named groups of faults, locktest list names them) as well as faults, each a column of its own"}},
	"findings": {Meaning: "also write the scoreboard as Markdown without run links to this file (docs/findings.md)"},
	"impl": {Meaning: "the lock implementation to run, by the names locktest list gives",
		Lists: map[string]string{"matrix": "a matrix measures several impls, each in rows of its own",
			"debate": "a debate runs the scenarios of several impls (their scenarios, picked by the impl each runs)"},
		Defaults: map[string]string{"matrix": "every impl: a matrix compares them all unless told which",
			"debate": "every scenario's impl: a debate runs its whole catalogue unless told which"}},
	"insecure-ignore-host-key": {Meaning: "do not check the ssh hosts' keys (results.json records it)"},
	"cluster-opt":              {Meaning: "cluster settings key=value of the backend (docs/backends.md), refused where no run reads them"},
	"image":                    {Meaning: "the docker provider's image of a backend, backend=ref, repeatable"},
	"impl-opt":                 {Meaning: "impl settings key=value (docs/backends.md), passed to the impl's clients"},
	"resource": {Meaning: "the resource store's mode: what it checks of a write before it accepts it (none, fenced, check-and-set, etcd-guarded)",
		Defaults: map[string]string{"matrix": "fenced: the matrix's mutex columns always run with none, so that violations show; the flag picks the store of its saved-by-fencing column, which is on unless --resource none"}},
	"inventory": {Meaning: "the ssh provider's inventory file of the hosts (locktest lab up writes one)"},
	"json":      {Meaning: "also write the command's result as JSON to this file, in the form docs/schemas gives"},
	"junit":     {Meaning: "also write JUnit XML to this file, one test case per scenario or matrix cell"},
	"max-rate":  {Meaning: "a safe scenario is held when the one-sided 95% upper bound of its violation rate is below this"},
	"md":        {Meaning: "also write the matrix as Markdown to this file (docs/matrix.md)"},
	"out": {Meaning: "the folder this command writes its pages and their JSON into",
		Defaults: map[string]string{
			"debate": "<store>/debate/<time>: every debate keeps its own scoreboard beside its runs",
			"matrix": "the store: a matrix is its store's runs aggregated, and --from reads them back from there",
			"merge":  "./merged: merge has no store of its own, it reads several",
		}},
	"parallel": {Meaning: "how many runs go at once, each with its own ports, network and store folder",
		Defaults: map[string]string{"matrix": "measured (0), not a number: the matrix picks its runs at once from the CPU its runs use, the machine's idle CPU and its stalls, as they go (docs/matrix-howto.md)"}},
	"persistence": {Meaning: "the node durability of the backends that have it (Redis's appendfsync): off, everysec or always"},
	"plan":        {Meaning: "a plan file: the impls, faults, run settings, seeds and gates of a comparison kept in a repository, which flags on the command line override"},
	"profile":     {Meaning: "a folder for CPU and heap profiles of the command (go tool pprof reads them)"},
	"provider": {Meaning: "where the nodes run: local, docker or ssh",
		Defaults: map[string]string{"cleanup": "none: cleanup removes what runs left on this host, and only --provider ssh reaches further"}},
	"quiet": {Meaning: "no progress on stderr; the result still goes to stdout",
		Defaults: map[string]string{"run": "on when stderr is not a terminal: a run's progress is a log of every fault and phase, not one line per run", "margin": "the flag is run's (margin takes every run flag), but margin's progress is a line per value tried, shown unless -q"}},
	"seed": {Meaning: "the seed of every random choice; a debate's scenarios run seed, seed+1, …"},
	"seeded": {Meaning: "the zoo: the seeded impls, correct recipes with one bug planted each",
		Defaults: map[string]string{}},
	"seeds": {Meaning: "how many seeds, each its own run, per scenario or matrix cell",
		Defaults: map[string]string{
			"debate": "the fewest that decide: those after which a safe scenario with no violation is held at --max-rate (16 at 15%)",
			"matrix": "1: one run per cell is a smoke test of every impl; a comparison to gate on takes --seeds 5 (a held cell's upper bound is 79% at 1 seed, 43% at 5)",
		}},
	"shard":        {Meaning: "make only shard I of N of the runs (I/N); locktest merge joins the shards"},
	"store":        {Meaning: "the folder of stored runs, where this command's runs go"},
	"track-record": {Meaning: "also write the track record of the public bugs the scenarios reproduce as Markdown to this file (docs/track-record.md)"},
	"time": {Meaning: "how long each run's workload runs",
		Defaults: map[string]string{"matrix": "8s: a matrix makes hundreds of runs, and its cells were measured at 8 s (docs/matrix.md)"}},
	"ttl": {Meaning: "the lock's lease time",
		Defaults: map[string]string{"matrix": "500ms: the matrix's faults are sized in TTLs (a pause of 4 TTLs), and a short lease makes each run's fault and recovery fit in its 8 s"}},
}

// flagInfo is one command's flag, as the flag walk sees it.
type flagInfo struct {
	Command, Type, Default string
}

// sharedFlags walks every visible command's flags (help and the old names
// of flags aside) and returns, by name, those of the names that more than
// one command has, run and margin aside when no other has it.
func sharedFlags() map[string][]flagInfo {
	all := map[string][]flagInfo{}
	for path, c := range visibleCommands() {
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if f.Name == "help" || f.Deprecated != "" || f.Hidden {
				return
			}
			all[f.Name] = append(all[f.Name], flagInfo{Command: path, Type: f.Value.Type(), Default: f.DefValue})
		})
	}
	for n, fs := range all {
		onlyRunAndMargin := true
		for _, f := range fs {
			onlyRunAndMargin = onlyRunAndMargin && (f.Command == "run" || f.Command == "margin")
		}
		if len(fs) < 2 || onlyRunAndMargin {
			// margin defines run's flags with run's own code: the two
			// cannot differ.
			delete(all, n)
			continue
		}
		slices.SortFunc(fs, func(a, b flagInfo) int { return strings.Compare(a.Command, b.Command) })
	}
	return all
}

// baseType is a flag's type with lists and widths taken off: int64 is int,
// stringSlice is string.
func baseType(t string) (base string, list bool) {
	switch t {
	case "stringSlice", "strings":
		return "string", true
	case "int64", "int32":
		return "int", false
	case "bool":
		return "bool", false
	}
	if t == "" {
		return "string", false
	}
	return t, false
}

// vocabularyProblems says where the commands' flags break the vocabulary:
// a shared name missing from it, a name it keeps that no two commands
// share, a list where the others take one value with no reason, two types,
// and a default that differs with no reason.
func vocabularyProblems(shared map[string][]flagInfo) []string {
	var out []string
	for name, fs := range shared {
		v, ok := vocabulary[name]
		if !ok {
			out = append(out, fmt.Sprintf("--%s is in %s: say what it means in vocabulary", name, commandsOf(fs)))
			continue
		}
		types := map[string]bool{}
		for _, f := range fs {
			base, list := baseType(f.Type)
			types[base] = true
			if list && v.Lists[f.Command] == "" && !allLists(fs) {
				out = append(out, fmt.Sprintf("--%s takes a list in %s and one value elsewhere: say why in vocabulary's Lists", name, f.Command))
			}
		}
		if len(types) > 1 {
			out = append(out, fmt.Sprintf("--%s has two types across %s: one name, one meaning", name, commandsOf(fs)))
		}
		// The common default is the one of the commands that give no
		// reason; each other must give one.
		common := map[string]bool{}
		for _, f := range fs {
			if _, why := v.Defaults[f.Command]; !why {
				common[normDefault(f.Default)] = true
			}
		}
		if len(common) > 1 {
			out = append(out, fmt.Sprintf("--%s has the defaults %v in %s: make them one, or say why in vocabulary's Defaults", name, keys(common), commandsOf(fs)))
		}
	}
	for name := range vocabulary {
		if _, ok := shared[name]; !ok {
			out = append(out, fmt.Sprintf("--%s is in vocabulary but in fewer than two commands", name))
		}
	}
	slices.Sort(out)
	return out
}

func allLists(fs []flagInfo) bool {
	for _, f := range fs {
		if _, list := baseType(f.Type); !list {
			return false
		}
	}
	return true
}

// normDefault is a default as the help shows it, with the empty forms of
// a zero value made one.
func normDefault(d string) string {
	switch d {
	case "", "0", "0s", "false", "[]":
		return ""
	}
	return d
}

func commandsOf(fs []flagInfo) string {
	var cs []string
	for _, f := range fs {
		cs = append(cs, cmdName(f.Command))
	}
	return strings.Join(cs, ", ")
}

func cmdName(path string) string {
	if path == "" {
		return "locktest"
	}
	return path
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, fmt.Sprintf("%q", k))
	}
	slices.Sort(out)
	return out
}

// renderVocabulary is the flag table of docs/cli.md: every shared flag,
// its meaning, the commands that have it with their defaults, and why a
// default or a list differs.
func renderVocabulary(shared map[string][]flagInfo) string {
	var names []string
	for n := range shared {
		names = append(names, n)
	}
	slices.Sort(names)
	var b strings.Builder
	b.WriteString("| flag | meaning | commands (default) | where it differs, and why |\n| --- | --- | --- | --- |\n")
	for _, n := range names {
		v := vocabulary[n]
		var cs, why []string
		for _, f := range shared[n] {
			d := normDefault(f.Default)
			if d == "" {
				d = "none"
			}
			if n == "seeds" && f.Command == "debate" {
				d = "the seeds that decide"
			}
			cs = append(cs, fmt.Sprintf("`%s` (%s)", cmdName(f.Command), d))
			if r := v.Defaults[f.Command]; r != "" {
				why = append(why, "`"+cmdName(f.Command)+"`: "+r)
			}
			if r := v.Lists[f.Command]; r != "" {
				why = append(why, "`"+cmdName(f.Command)+"` takes a list: "+r)
			}
		}
		fmt.Fprintf(&b, "| **--%s** | %s | %s | %s |\n", n, v.Meaning, strings.Join(cs, ", "), strings.Join(why, "; "))
	}
	return b.String()
}
