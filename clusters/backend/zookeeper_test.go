package backend

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestZooCfgGolden: the zoo.cfg of a peer of three is the one in
// testdata/.
func TestZooCfgGolden(t *testing.T) {
	c := ZooKeeperConfig{Node: "n2", Tick: 200 * time.Millisecond, DataDir: "/data", ClientIP: "10.0.0.2", ClientPort: 2181,
		Peers: []ZooKeeperPeer{{1, "10.0.0.1", 2888, 3888}, {2, "10.0.0.2", 2888, 3888}, {3, "10.0.0.3", 2888, 3888}}}
	matchGolden(t, "zoo.cfg", "zoo.cfg.golden", c.String())
}

// matchGolden fails t when got is not the file testdata/name, and writes
// got there first when UPDATE_GOLDEN is set; what names got in the
// failure.
func matchGolden(t *testing.T, what, name, got string) {
	t.Helper()
	golden := filepath.Join("testdata", name)
	if os.Getenv("UPDATE_GOLDEN") != "" {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("%s\n%s\nwant (%s)\n%s", what, got, golden, want)
	}
}

// TestStandaloneIsNotDisabledForOnePeer: one peer alone may run
// standalone; an ensemble may not.
func TestStandaloneIsNotDisabledForOnePeer(t *testing.T) {
	one := ZooKeeperConfig{Node: "n1", Tick: time.Second, Peers: []ZooKeeperPeer{{1, "127.0.0.1", 1, 2}}}.String()
	if slices.Contains(lines(one), "standaloneEnabled=false") {
		t.Errorf("one peer's zoo.cfg disables standalone:\n%s", one)
	}
}

// TestJVMEndsWithTheMainClass: the extra properties come before the class
// path, the main class and the zoo.cfg, which end the command line.
func TestJVMEndsWithTheMainClass(t *testing.T) {
	args := ZooKeeperJVM("64m", "a.jar:b.jar", "/c/log4j.properties", "/c/zoo.cfg", "-Dx=y")
	tail := args[len(args)-5:]
	if !slices.Equal(tail, []string{"-Dx=y", "-cp", "a.jar:b.jar", ZooKeeperMain, "/c/zoo.cfg"}) {
		t.Errorf("ZooKeeperJVM ends %q", tail)
	}
	if !slices.Contains(args, "-Xmx64m") || !slices.Contains(args, "-Dlog4j.configuration=file:/c/log4j.properties") {
		t.Errorf("ZooKeeperJVM %q lacks the heap or the log4j file", args)
	}
}

func lines(s string) []string {
	var out []string
	for l := range strings.Lines(s) {
		out = append(out, strings.TrimSuffix(l, "\n"))
	}
	return out
}

// TestSrvrIsWhitelisted: every peer allows the four-letter word srvr,
// which the harness asks for a peer's mode (ZooKeeperRole) and its
// version (Versions).
func TestSrvrIsWhitelisted(t *testing.T) {
	for _, peers := range [][]ZooKeeperPeer{{{1, "127.0.0.1", 1, 2}}, {{1, "10.0.0.1", 2888, 3888}, {2, "10.0.0.2", 2888, 3888}}} {
		var words []string
		for _, l := range lines(ZooKeeperConfig{Node: "n1", Tick: time.Second, Peers: peers}.String()) {
			if v, ok := strings.CutPrefix(l, "4lw.commands.whitelist="); ok {
				words = append(words, strings.Split(v, ",")...)
			}
		}
		if !slices.Contains(words, "srvr") && !slices.Contains(words, "*") {
			t.Errorf("the 4lw whitelist of %d peers is %q, without srvr", len(peers), words)
		}
	}
}
